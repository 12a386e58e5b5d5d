// Single copy for the shm provider (kCapSingleCopy): the receiver exposes its application buffer,
// the sender writes straight into it with process_vm_writev (one copy instead of two).
//
// The window's life is one word in the exposer's SideBlock (shm_layout.h, WindowWord):
//
//   exposer (receiving thread)                 writer (peer's sending thread)
//   ExposeWindow: store (g, Open)
//                                              WriteWindow: CAS (g, Open) -> (g, Busy)
//                                                process_vm_writev(peer_pid, ...)
//                                                store (g, Done)
//   RevokeWindow: CAS (g, Open) -> (g, Idle)  -- won: kUnused, the writer's CAS can only fail now
//                 lost: (g, Busy) -> wait for (g, Done); (g, Done) -> kWritten
//
// Who may write into whom: a writer only targets the pid SO_PEERCRED gave it at set-up
// (Parts::peer_pid), never one the peer names; an exposer exposes only from the process the peer
// validated (Parts::self_pid_seen == getpid()), so a fork child or a process that imported the
// endpoint never has the peer's writes aimed at a process that is not it. Whether the kernel lets
// us write into the peer (same uid, Yama, dumpable, seccomp, LSMs) is probed once per connection
// with a write to address 0 (EFAULT = permitted, nothing written); EPERM/ENOSYS at any time turn
// single copy off for the connection, and the protocol falls back to the copy path.
//
// Thread-safety: Expose/Revoke on the receiving thread, Write/CanWriteWindows on the sending thread
// (their LocalState fields are separate). Trust: the peer can write the window word at any time;
// the exposer treats any value but the ones above as a violation (ECONNRESET), and a writer only
// ever loses a CAS because of it.
#include <sched.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "sanlib/common/clock.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/fabric/shm/shm_endpoint.h"

namespace san::fabric::shm {
namespace {

// How long RevokeWindow waits for a write in progress. A correct writer needs one
// process_vm_writev of at most kMaxWindowWrite bytes (a few ms even on a loaded machine).
constexpr uint64_t kRevokeWaitNs = 1'000'000'000;
constexpr uint64_t kRevokeLivenessEveryNs = 10'000'000;
constexpr uint32_t kRevokeSpins = 2000;

// 1 permitted, 2 refused: what the kernel says about process_vm_writev into `pid`. The remote
// address is 0 (never mapped: vm.mmap_min_addr), so a permitted probe writes nothing and fails
// with EFAULT after the permission checks.
uint32_t ProbeWrite(pid_t pid) {
  if (pid <= 0) return 2;
  char byte = 0;
  iovec local{&byte, 1};
  iovec remote{nullptr, 1};
  const ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
  return n < 0 && errno == EFAULT ? 1 : 2;
}

}  // namespace

bool ShmEndpoint::CanWriteWindows() {
  uint32_t probe = local_->write_probe.load(std::memory_order_relaxed);
  if (probe == 0) {
    probe = ProbeWrite(parts_.peer_pid);
    local_->write_probe.store(probe, std::memory_order_relaxed);
  }
  return probe == 1;
}

bool ShmEndpoint::CanExposeWindows() const {
  return parts_.self_pid_seen > 0 && ThisPid() == parts_.self_pid_seen &&
         local_->connected.load(std::memory_order_relaxed) != 0;
}

Result<WindowKey> ShmEndpoint::ExposeWindow(void* addr, size_t length) {
  if (local_->broken_reason.load(std::memory_order_relaxed) != 0) {
    return Status(ECONNRESET, "ExposeWindow");
  }
  if (!CanExposeWindows()) return Status(EPERM, "ExposeWindow: not the validated process");
  if (addr == nullptr || length == 0) return Status(EINVAL, "ExposeWindow: empty");
  if (local_->window_exposed.load(std::memory_order_relaxed) != 0) {
    return Status(EBUSY, "ExposeWindow: a window is already exposed");
  }
  const uint32_t generation = local_->window_generation.load(std::memory_order_relaxed) + 1;
  local_->window_generation.store(generation, std::memory_order_relaxed);
  local_->window_exposed.store(1, std::memory_order_relaxed);
  // Release: the protocol sends the key after this, and the writer's CAS must find it open.
  own_->window.store(WindowWord(generation, WindowState::kOpen), std::memory_order_release);
  WindowKey key;
  key.addr = reinterpret_cast<uintptr_t>(addr);
  key.length = length;
  key.generation = generation;
  return key;
}

Result<WindowFate> ShmEndpoint::RevokeWindow() {
  if (local_->window_exposed.load(std::memory_order_relaxed) == 0) {
    return Status(EINVAL, "RevokeWindow: none exposed");
  }
  const uint32_t g = local_->window_generation.load(std::memory_order_relaxed);
  const uint64_t open = WindowWord(g, WindowState::kOpen);
  const uint64_t busy = WindowWord(g, WindowState::kBusy);
  const uint64_t done = WindowWord(g, WindowState::kDone);
  uint64_t word = open;
  if (own_->window.compare_exchange_strong(word, WindowWord(g, WindowState::kIdle),
                                           std::memory_order_acq_rel)) {
    local_->window_exposed.store(0, std::memory_order_relaxed);
    return WindowFate::kUnused;
  }
  // The peer claimed it (or scribbled it). Wait for the write to finish: returning earlier would
  // let it land in memory the application has taken back.
  const uint64_t start = NowNs();
  uint64_t next_liveness = start + kRevokeLivenessEveryNs;
  for (uint32_t spin = 0;; ++spin) {
    word = own_->window.load(std::memory_order_acquire);
    if (word == done) {
      local_->window_exposed.store(0, std::memory_order_relaxed);
      return WindowFate::kWritten;
    }
    if (word != busy) {
      Break(ECONNRESET);
      local_->window_exposed.store(0, std::memory_order_relaxed);
      return Status(ECONNRESET, "RevokeWindow: window state scribbled");
    }
    if (spin < kRevokeSpins) {
      CpuRelax();
      continue;
    }
    const uint64_t now = NowNs();
    if (now >= next_liveness) {
      // A peer that died mid-write writes no more: its rendezvous socket reads EOF once every
      // process holding it is gone.
      CheckPeerAlive(true);
      next_liveness = now + kRevokeLivenessEveryNs;
    }
    if (local_->broken_reason.load(std::memory_order_relaxed) != 0 || now - start > kRevokeWaitNs) {
      Break(ECONNRESET);
      local_->window_exposed.store(0, std::memory_order_relaxed);
      return Status(ECONNRESET, "RevokeWindow: the peer's write did not finish");
    }
    const timespec nap{0, 20'000};
    nanosleep(&nap, nullptr);
  }
}

Result<size_t> ShmEndpoint::WriteWindow(const WindowKey& key, const Segment* segs, int nsegs) {
  if (local_->broken_reason.load(std::memory_order_relaxed) != 0) {
    return Status(ECONNRESET, "WriteWindow");
  }
  if (nsegs <= 0 || nsegs > kMaxWindowSegments) return Status(EINVAL, "WriteWindow: segments");
  iovec local[kMaxWindowSegments];
  uint64_t total = 0;
  for (int i = 0; i < nsegs; ++i) {
    local[i] = iovec{const_cast<void*>(segs[i].addr), segs[i].length};
    total += segs[i].length;
  }
  if (total == 0 || total > key.length)
    return Status(EINVAL, "WriteWindow: larger than the window");
  if (!CanWriteWindows()) return Status(EPERM, "WriteWindow: not permitted on this connection");
  uint64_t word = WindowWord(key.generation, WindowState::kOpen);
  if (!peer_->window.compare_exchange_strong(word, WindowWord(key.generation, WindowState::kBusy),
                                             std::memory_order_acq_rel)) {
    return Status(ECANCELED, "WriteWindow: window revoked");
  }
  // Only the pid validated at set-up, never one the peer names; the address and length are the
  // peer's own claim about its own memory (a lie only hurts the peer).
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(key.addr)), total};
  const ssize_t n =
      process_vm_writev(parts_.peer_pid, local, static_cast<unsigned long>(nsegs), &remote, 1, 0);
  const int err = errno;
  // Release: the bytes are in place before the exposer can see Done.
  peer_->window.store(WindowWord(key.generation, WindowState::kDone), std::memory_order_release);
  if (n > 0) return static_cast<size_t>(n);
  if (n == 0) return Status(EFAULT, "process_vm_writev: nothing written");
  if (err == EPERM || err == ENOSYS || err == EACCES) {
    local_->write_probe.store(2, std::memory_order_relaxed);
  }
  return Status(err, "process_vm_writev");
}

}  // namespace san::fabric::shm
