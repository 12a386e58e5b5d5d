// Readiness of SAN sockets in poll(2) terms, and poll over a mix of SAN sockets and kernel fds.
//
// The events mirror tcp_poll() for the same situation, so a program sees what it would see on a
// kernel socket: data or EOF -> POLLIN; the peer's FIN -> POLLIN|POLLRDHUP; window open or our
// side shut for writing -> POLLOUT (a write then fails with EPIPE, as on TCP); both directions shut
// -> POLLHUP; a broken connection -> POLLIN|POLLOUT|POLLHUP|POLLRDHUP, plus POLLERR until the
// error has been reported once (SO_ERROR or a failed call).
#include <sys/eventfd.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "sanlib/common/clock.h"
#include "sanlib/common/kernel.h"
#include "sanlib/socket/late_kick.h"
#include "sanlib/socket/late_phase.h"
#include "sanlib/socket/late_upgrade.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"
#include "sanlib/socket/spin_then_sleep.h"
#include "sanlib/socket/tcp_move.h"

namespace san {
namespace {

constexpr short kInEvents = POLLIN | POLLRDNORM;
constexpr short kOutEvents = POLLOUT | POLLWRNORM;
// Kernel fds are polled (a syscall) only every this many spins while waiting for SAN sockets.
constexpr int kKernelCheckEvery = 32;

// A nonblocking connect() whose kernel half is still in progress: not writable until it is done.
// Returns the kernel's revents once finished (0 while in progress).
short ConnectProgress(SanSocket& s) {
  pollfd p{s.fd, POLLOUT, 0};
  if (kernel::poll(&p, 1, 0) <= 0) return 0;
  s.connecting.store(false, std::memory_order_release);
  if (p.revents & (POLLERR | POLLHUP)) {
    int err = 0;
    socklen_t len = sizeof err;
    kernel::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    s.connect_error.store(err ? err : ECONNREFUSED);
    s.stream->Fail(ECONNREFUSED);
  }
  return p.revents;
}

// Kernel fds among `fds` that the kernel reports readable and that may be late upgrade
// candidates: the readiness may be a switching peer's wake byte alone (late_upgrade.h
// SettleReadable). True if one of them is kShm now: sort the fds again and ask it.
bool MovedOnReadiness(const pollfd* fds, size_t n) {
  bool moved = false;
  for (size_t i = 0; i < n; ++i) {
    if (fds[i].fd < 0 || !(fds[i].revents & POLLIN)) continue;
    SanSocket* s = Runtime::Get().table().Find(fds[i].fd);
    if (s && SettleReadable(*s)) moved = true;
  }
  return moved;
}

// One entry of a san_poll call.
struct Slot {
  nfds_t index;
  SanSocket* socket;  // nullptr: a kernel fd
};

// How a sleep of Poll's on kernel fds among which are candidates ended.
struct CandidateSleep {
  int rc;       // ppoll's result for the program's fds
  bool whole;   // it was to last all the time left
  bool kicked;  // a move's kick ended it
};

// One sleep on the program's fds while some are candidates (Poll, below): for all the time left
// while LateQuiet(seen) holds -- the thread's wake-up eventfd polled with them, in PollSleepers --
// else a nap. `scratch` holds the fds and the wake-up eventfd.
CandidateSleep SleepOnCandidates(pollfd* fds, nfds_t nfds, int left, uint64_t seen,
                                 const sigset_t* sigmask, std::vector<pollfd>* scratch) {
  const int wake = ThisThreadWakeFd();
  WaiterSet& sleepers = late_kick::PollSleepers();
  const int slot = wake >= 0 ? sleepers.Add(wake) : -1;
  std::optional<late_kick::Sleeper> counted;
  if (slot >= 0) counted.emplace();
  const bool quiet = slot >= 0 && LateQuiet(seen);
  const int due = Runtime::Get().connections().MsUntilLateDue();
  const int sleep = SoonerMs(left, quiet ? due : kLateNapMs);
  CandidateSleep out{0, sleep == left, false};
  if (slot < 0) {
    out.rc = kernel::ppoll(fds, nfds, sleep, sigmask);
    return out;
  }
  scratch->assign(fds, fds + nfds);
  scratch->push_back(pollfd{wake, POLLIN, 0});
  out.rc = kernel::ppoll(scratch->data(), scratch->size(), sleep, sigmask);
  const int err = errno;
  counted.reset();
  sleepers.Remove(slot, wake);
  if (out.rc < 0) {
    errno = err;
    return out;
  }
  for (nfds_t i = 0; i < nfds; ++i) fds[i].revents = (*scratch)[i].revents;
  if (scratch->back().revents) {
    eventfd_t v;
    eventfd_read(wake, &v);
    out.kicked = true;
    --out.rc;
  }
  return out;
}

}  // namespace

short SocketRevents(SanSocket& s, short events, ReadinessStamp* stamp) {
  if (stamp) *stamp = ReadinessStamp{};
  if (s.connecting.load(std::memory_order_acquire) && !ConnectProgress(s)) return 0;
  // What this look reaps (data, credits) may be what another thread asleep on the socket waits
  // for, and its doorbell will not ring for it again: wake it, as the data path does after every
  // attempt. Only counted when somebody sleeps (rare: several threads on one socket, as gRPC's
  // pollers are), so the common poll pays one atomic load.
  const bool others_asleep = s.sleepers.load(std::memory_order_acquire) > 0;
  const uint64_t reaped_before = others_asleep ? s.stream->Stats().packets_received : 0;
  if (events & POLLIN) s.stream->Flush();  // SOVIA's flush point: the application waits to read
  // The peer's TCP bytes from before its move to shm (late_upgrade.h) are readable first, and
  // until they are all read nothing else is: a read returns EAGAIN while the kernel has none of
  // them queued, whatever the stream holds. So the stream's read events count only once they are
  // (`tcp_first` below). They used to count at once: a level-triggered poller woke to EAGAIN until
  // the TCP bytes came, and an edge-triggered epoll member reported EPOLLIN for the stream's data,
  // so the TCP bytes' arrival was no new edge and its reader slept for good (docs/sockets.md, "The
  // peer's TCP bytes first"; LateUpgrade.StreamDataWaitsForThePeersLastTcpBytesInPollAndEpoll).
  bool tcp_due = false;
  const short inflow = InflowPending(s) ? InflowRevents(s, &tcp_due) : 0;
  const bool tcp_first = tcp_due && !(inflow & POLLIN);
  proto::Readiness r = s.stream->GetReadiness();
  if (others_asleep && s.stream->Stats().packets_received != reaped_before) WakeSleepers(s);
  // Moved to TCP (tcp_move.h): the SAN queue's data and EOF, then, once the relay is done, the
  // kernel socket's events.
  short kernel_revents = 0;
  if (r.moved && !r.error) {
    if (AdvanceMoved(s).ok()) {
      pollfd p{s.fd.load(), events, 0};
      if (kernel::poll(&p, 1, 0) > 0) kernel_revents = p.revents;
    }
    r = s.stream->GetReadiness();
  }
  // No stamp while the inflow runs: it ends by reads of the kernel socket, which leave the stream's
  // version as it was, and a stamp of the masked events would outlive it (StampHolds).
  if (stamp && !others_asleep && !inflow && !tcp_first && !r.moved &&
      !s.connecting.load(std::memory_order_acquire)) {
    *stamp =
        ReadinessStamp{r.version, r.packets_received, s.read_shut.load(std::memory_order_relaxed),
                       s.error_reported.load(std::memory_order_relaxed)};
  }
  short revents =
      static_cast<short>(kernel_revents | (inflow ? kInEvents | (inflow & POLLRDHUP) : 0));
  const bool read_closed =
      (r.peer_closed && !tcp_first) || s.read_shut.load(std::memory_order_relaxed);
  if (tcp_first) r.readable = false;
  // An error too: the reads return the TCP bytes first (a switch aborted by the peer: its TCP
  // bytes, then ECONNRESET).
  if (r.error && !tcp_first) {
    revents = kInEvents | kOutEvents | POLLHUP | POLLRDHUP;
    if (!s.error_reported.load(std::memory_order_relaxed)) revents |= POLLERR;
  } else {
    if (r.readable || read_closed) revents |= kInEvents;
    if (read_closed) revents |= POLLRDHUP;
    if (r.writable || r.write_closed) revents |= kOutEvents;
    if (read_closed && r.write_closed) revents |= POLLHUP;
  }
  return revents & (events | POLLERR | POLLHUP);
}

bool StampHolds(SanSocket& s, const ReadinessStamp& stamp) {
  // The version first: an operation that ends after this load and reaped what the endpoint held
  // is the "look just before" of the contract (socket_ops.h).
  return stamp.version != 0 && s.stream->Version() == stamp.version &&
         !s.connecting.load(std::memory_order_acquire) &&
         s.read_shut.load(std::memory_order_relaxed) == stamp.read_shut &&
         s.error_reported.load(std::memory_order_relaxed) == stamp.error_reported &&
         !InflowPending(s) && s.stream->EndpointQuiet();
}

int Poll(pollfd* fds, nfds_t nfds, int timeout_ms, const sigset_t* sigmask) {
  // Scratch space kept per thread: a server loop polls once per request, and four allocations per
  // call were a measurable part of a small RPC's round trip. Poll never re-enters itself.
  struct Scratch {
    std::vector<Slot> slots;
    std::vector<SanSocket*> sans;
    std::vector<short> san_events;
    std::vector<pollfd> kernel_fds;
  };
  thread_local Scratch scratch;
  std::vector<Slot>& slots = scratch.slots;
  std::vector<SanSocket*>& sans = scratch.sans;
  std::vector<short>& san_events = scratch.san_events;
  std::vector<pollfd>& kernel_fds = scratch.kernel_fds;
  // Sorts the fds into SAN sockets and kernel fds; true if a kernel one may move to shm meanwhile
  // (a late upgrade candidate: socket/late_upgrade.h).
  auto sort_fds = [&] {
    slots.clear();
    sans.clear();
    san_events.clear();
    kernel_fds.clear();
    bool may_move = false;
    for (nfds_t i = 0; i < nfds; ++i) {
      SanSocket* s = fds[i].fd >= 0 ? Runtime::Get().table().Find(fds[i].fd) : nullptr;
      if (s && s->mode.load(std::memory_order_acquire) != SocketMode::kShm) {
        // Moving now (SanlibCarries reads in the order a switch needs) or later: a nap.
        may_move = may_move || SanlibCarries(*s);
        s = nullptr;
      }
      slots.push_back(Slot{i, s});
      if (s) {
        sans.push_back(s);
        san_events.push_back(fds[i].events);
      } else {
        kernel_fds.push_back(fds[i]);
      }
    }
    return may_move;
  };
  // Kernel fds only: the kernel's poll -- but a candidate may move in another thread's call while
  // we sleep, after which its kernel socket may never wake us (the peer's wake byte read, or come
  // before we slept). While no move of the process is under way, and none ended since we looked,
  // the kernel's readiness is the whole truth and a move's kick ends the sleep (late_kick.h);
  // otherwise, or with no kick, in naps. Each sleep that ends with nothing ready, a new look.
  uint64_t seen = ReadinessGeneration();
  bool may_move = sort_fds();
  if (sans.empty()) {
    if (!may_move) return kernel::ppoll(fds, nfds, timeout_ms, sigmask);
    const WaitBudget naps(timeout_ms);
    for (;;) {
      Runtime::Get().connections().StartIfLateDue();
      const int left = naps.remaining_ms();
      const CandidateSleep slept = SleepOnCandidates(fds, nfds, left, seen, sigmask, &kernel_fds);
      // The kernel's readiness is the whole truth while no move was under way: a readable
      // candidate's step is taken only otherwise (a look at 1,000 readable ones at every poll
      // counted them all as in use, and their tries kept the process in naps).
      if (slept.rc > 0 && !LateQuiet(seen) && MovedOnReadiness(fds, nfds)) {
        may_move = sort_fds();
        break;  // one moved: the SAN way, which asks it what is ready
      }
      if (slept.rc != 0 || (slept.whole && !slept.kicked)) return slept.rc;
      seen = ReadinessGeneration();
      may_move = sort_fds();
      if (!sans.empty()) break;  // moved: the SAN way, for the time that is left
      if (!may_move) return kernel::ppoll(fds, nfds, naps.remaining_ms(), sigmask);
    }
    timeout_ms = naps.remaining_ms();
  }

  const WaitBudget budget(timeout_ms);
  SpinThenSleep engine(Runtime::Get().config(), timeout_ms);
  for (int round = 0;; ++round) {
    // Look at everything: SAN state directly, kernel fds without waiting.
    int ready = 0;
    for (const Slot& slot : slots) {
      if (!slot.socket) continue;
      pollfd& p = fds[slot.index];
      p.revents = SocketRevents(*slot.socket, p.events);
      if (p.revents) ++ready;
    }
    // The first round always looks at the kernel fds too: poll reports every ready fd at once.
    const bool check_kernel = !kernel_fds.empty() && round % kKernelCheckEvery == 0;
    if (check_kernel && kernel::poll(kernel_fds.data(), kernel_fds.size(), 0) < 0) return -1;
    if (check_kernel && may_move && MovedOnReadiness(kernel_fds.data(), kernel_fds.size())) {
      may_move = sort_fds();
      round = -1;
      continue;
    }
    size_t k = 0;
    for (const Slot& slot : slots) {
      if (slot.socket) continue;
      pollfd& p = fds[slot.index];
      p.revents = check_kernel ? kernel_fds[k].revents : 0;
      ++k;
      if (p.revents) ++ready;
    }
    if (ready > 0) {
      engine.Found();
      return ready;
    }
    if (timeout_ms == 0) return 0;
    if (engine.Spin()) continue;
    const int left = budget.remaining_ms();
    if (left == 0) return 0;
    // Sleep until a doorbell, a kernel fd or the timeout; then look again.
    for (pollfd& p : kernel_fds) p.revents = 0;
    int rc = SleepOnSockets(sans.data(), san_events.data(), sans.size(), kernel_fds.data(),
                            kernel_fds.size(), left, sigmask);
    if (rc < 0) return -1;
    round = -1;  // the next round looks at the kernel fds again
  }
}

}  // namespace san
