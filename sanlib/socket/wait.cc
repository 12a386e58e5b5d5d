// Sleeping on SAN sockets: the armed-doorbell protocol (DESIGN.md "Progress and blocking"), shared
// by the data path (one socket), san_poll (any mix of SAN sockets and kernel fds) and compat's
// epoll_wait (which sleeps in its own poll between ArmForSleep and FinishSleep).
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <time.h>

#include <vector>

#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/socket/socket_ops.h"

namespace san {
namespace {

// How long a sleeper on a connection whose relay is in progress naps before it looks again.
constexpr int kRelayNapMs = 5;

}  // namespace

int ThisThreadWakeFd() {
  struct Holder {
    int fd = -1;
    pid_t pid = 0;
    ~Holder() {
      if (fd >= 0) kernel::close(fd);
    }
  };
  thread_local Holder holder;
  const pid_t pid = ThisPid();
  if (holder.fd >= 0 && holder.pid == pid) return holder.fd;
  // A fork child's copy names the parent's eventfd: leave that to the parent, make our own.
  if (holder.fd >= 0) kernel::close(holder.fd);
  holder.fd = PlaceHigh(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  holder.pid = pid;
  return holder.fd;
}

void WakeSleepers(SanSocket& s) {
  if (s.sleepers.load(std::memory_order_acquire) == 0) return;
  s.waiters.Wake();
}

KernelSide PeekKernelSide(int fd) {
  char byte;
  const ssize_t n = kernel::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return KernelSide::kData;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
    return KernelSide::kQuiet;
  return KernelSide::kGone;  // EOF or an error (reset)
}

void CheckKernelSide(SanSocket& s) {
  // The peer's bytes from before its move to shm (late_upgrade.h): the data path reads them.
  if (InflowPending(s)) return;
  const KernelSide side = PeekKernelSide(s.fd);
  if (side == KernelSide::kQuiet) return;
  // EOF, reset, or bytes on a connection whose data goes over SAN: stop watching the kernel side.
  s.tcp_gone.store(true);
  if (side == KernelSide::kData) {
    // The peer wrote around its SAN channel (a program whose writes the compatibility layer does
    // not see, e.g. through glibc's internal stdio calls). Those bytes cannot be put in their
    // place in the stream: reset rather than deliver a stream with a hole in it.
    SAN_LOG_WARN("fd %d: bytes on the kernel socket under a SAN connection; connection reset",
                 s.fd.load());
    s.stream->Fail(ECONNRESET);
    return;
  }
  // What the peer posted before it went is already in our buffers: take it in first. Only a peer
  // that left without its FIN is an error.
  s.stream->Progress();
  if (!s.stream->GetReadiness().peer_closed) s.stream->Fail(ECONNRESET);
}

bool ArmForSleep(SanSocket* const* sockets, const short* events, size_t count,
                 std::vector<pollfd>* fds, std::vector<SleepWatch>* watches, const short* quiet) {
  // Arm every doorbell first, then re-check: anything arriving after the check rings one.
  // Registered before we count as a sleeper: a thread that sees us counted must find our wake fd
  // (else a writer slept forever on a window another thread opened).
  const int wake = ThisThreadWakeFd();
  std::vector<int> slots(count, -1);
  for (size_t armed = 0; armed < count; ++armed) {
    SanSocket& s = *sockets[armed];
    if (wake >= 0) slots[armed] = s.waiters.Add(wake);
    s.sleepers.fetch_add(1, std::memory_order_acq_rel);
    // A moved connection (tcp_move.h) waits on its kernel socket: the SAN side is silent for good.
    const bool moved = s.stream->Moved();
    const short ready_now =
        static_cast<short>(SocketRevents(s, events[armed]) & ~(quiet ? quiet[armed] : 0));
    if ((!moved && !s.stream->endpoint().Arm()) || ready_now) {
      for (size_t i = 0; i <= armed; ++i) {
        sockets[i]->sleepers.fetch_sub(1, std::memory_order_acq_rel);
        sockets[i]->waiters.Remove(slots[i], wake);
      }
      return true;
    }
  }
  watches->reserve(watches->size() + count);
  for (size_t i = 0; i < count; ++i) {
    SanSocket& s = *sockets[i];
    const int fd = s.fd.load();
    const bool moved = s.stream->Moved();
    // The kernel socket: for the peer's death, and while the peer's TCP bytes are still to come
    // (the inflow, late_upgrade.h), for them, whatever the stream says (its FIN may be in).
    const bool watch_tcp =
        moved || InflowPending(s) || (!s.tcp_gone.load() && !s.stream->GetReadiness().peer_closed);
    SleepWatch w{&s, s.id, fd, slots[i] >= 0 ? wake : -1, slots[i], watch_tcp, moved, fds->size()};
    fds->push_back(pollfd{moved ? -1 : s.stream->endpoint().notify_fd(), POLLIN, 0});
    fds->push_back(pollfd{w.wake, POLLIN, 0});  // a negative fd is ignored by poll
    // Moved: what the relay waits for until it is done, then what the caller waits for.
    const short relay = moved ? s.stream->RelayWaitsFor() : 0;
    const short tcp_events = !moved  ? short{POLLIN | POLLRDHUP}
                             : relay ? relay
                                     : static_cast<short>(events[i] | POLLRDHUP);
    fds->push_back(pollfd{w.watch_tcp ? fd : -1, tcp_events, 0});
    watches->push_back(w);
  }
  return false;
}

int SleepTimeout(const std::vector<SleepWatch>& watches, int timeout_ms) {
  for (const SleepWatch& w : watches) {
    // No wake-up slot: nobody can wake us for the other threads' progress; look again soon.
    if (w.slot < 0) return timeout_ms < 0 || timeout_ms > 1 ? 1 : timeout_ms;
    // A relay in progress (tcp_move.h) may be finished by another thread or the close thread,
    // which no event we watch reports: look again soon.
    if (w.moved && w.socket->stream->RelayWaitsFor() != 0) {
      return timeout_ms < 0 || timeout_ms > kRelayNapMs ? kRelayNapMs : timeout_ms;
    }
  }
  return timeout_ms;
}

void FinishSleep(const std::vector<SleepWatch>& watches, const std::vector<pollfd>& fds,
                 const SocketTable* revalidate) {
  for (const SleepWatch& w : watches) {
    if (revalidate && (revalidate->Find(w.fd) != w.socket || w.socket->id != w.id)) continue;
    SanSocket& s = *w.socket;
    if (fds[w.first].revents && !w.moved) {
      s.stream->endpoint().ClearNotify();
      // Another thread sleeping on the same doorbell may have missed it now.
      if (s.sleepers.load(std::memory_order_acquire) > 1) s.waiters.Wake();
    }
    if (fds[w.first + 1].revents) {
      eventfd_t v;
      eventfd_read(w.wake, &v);  // ours alone: no other thread's wake-up is taken
    }
    if (fds[w.first + 2].revents && !w.moved) CheckKernelSide(s);
    s.waiters.Remove(w.slot, w.wake);
    s.sleepers.fetch_sub(1, std::memory_order_acq_rel);
  }
}

namespace {

constexpr int kLimitedNapMs = 1;

// Whether `n` fds are more than RLIMIT_NOFILE lets poll() watch.
bool MoreFdsThanAllowed(size_t n) {
  rlimit limit{};
  return getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
         n > limit.rlim_cur;
}

}  // namespace

int SleepOnSockets(SanSocket* const* sockets, const short* events, size_t count, pollfd* kernel_fds,
                   nfds_t kernel_count, int timeout_ms, const sigset_t* sigmask) {
  std::vector<pollfd> fds(kernel_fds, kernel_fds + kernel_count);
  std::vector<SleepWatch> watches;
  if (ArmForSleep(sockets, events, count, &fds, &watches)) return 1;
  const int sleep_ms = SleepTimeout(watches, timeout_ms);
  int result = kernel::ppoll(fds.data(), fds.size(), sleep_ms, sigmask);
  int err = errno;
  if (result < 0 && err == EINVAL && MoreFdsThanAllowed(fds.size())) {
    // The process lowered RLIMIT_NOFILE below the fds we watch (vsftpd's sessions set it to 0
    // after chroot): poll refuses, and no fd can be made for a wake-up either. Nap, then the
    // caller looks at its sockets again (their readiness is in shared memory) -- a wake-up up to
    // kLimitedNapMs late, instead of an EINVAL the program takes for a broken connection.
    if (sleep_ms != 0) {
      const timespec nap{
          0, (sleep_ms < 0 || sleep_ms > kLimitedNapMs ? kLimitedNapMs : sleep_ms) * 1000000L};
      nanosleep(&nap, nullptr);
    }
    result = 0;
    err = 0;
  }
  if (result > 0) {
    for (nfds_t i = 0; i < kernel_count; ++i) kernel_fds[i].revents = fds[i].revents;
  } else {
    for (pollfd& p : fds) p.revents = 0;  // a failed or timed-out poll leaves them undefined
  }
  FinishSleep(watches, fds, nullptr);
  errno = err;
  return result;
}

Status SleepOnSocket(SanSocket& s, bool want_write, int timeout_ms) {
  SanSocket* one = &s;
  const short events = want_write ? POLLOUT : POLLIN;
  int rc = SleepOnSockets(&one, &events, 1, nullptr, 0, timeout_ms);
  if (rc < 0) return Status::FromErrno("poll");
  if (rc == 0) return Status(ETIMEDOUT, "poll");
  return Status::Ok();
}

}  // namespace san
