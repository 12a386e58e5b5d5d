// Sleeping on SAN sockets: the armed-doorbell protocol (DESIGN.md "Progress and blocking"), shared
// by the data path (one socket), san_poll (any mix of SAN sockets and kernel fds) and compat's
// epoll_wait (which sleeps in its own poll between ArmForSleep and FinishSleep).
#include <sys/eventfd.h>

#include <vector>

#include "common/fd_placement.h"
#include "common/log.h"
#include "socket/kernel.h"
#include "socket/socket_ops.h"

namespace san {

int WakeFdOf(SanSocket& s) {
  int fd = s.wake_fd.load(std::memory_order_acquire);
  if (fd >= 0) return fd;
  int mine = PlaceHigh(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (mine < 0) return -1;
  if (!s.wake_fd.compare_exchange_strong(fd, mine)) {
    kernel::close(mine);
    return fd;
  }
  return mine;
}

void WakeSleepers(SanSocket& s) {
  if (s.sleepers.load(std::memory_order_acquire) == 0) return;
  int fd = s.wake_fd.load(std::memory_order_acquire);
  if (fd >= 0) eventfd_write(fd, 1);
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
                 std::vector<pollfd>* fds, std::vector<SleepWatch>* watches) {
  // Arm every doorbell first, then re-check: anything arriving after the check rings one.
  for (size_t armed = 0; armed < count; ++armed) {
    SanSocket& s = *sockets[armed];
    // The wake fd exists before we count as a sleeper: a thread that sees us counted and finds no
    // wake fd would wake nobody (a writer then slept forever on a window another thread opened).
    WakeFdOf(s);
    s.sleepers.fetch_add(1, std::memory_order_acq_rel);
    if (!s.stream->endpoint().Arm() || SocketRevents(s, events[armed])) {
      for (size_t i = 0; i <= armed; ++i) {
        sockets[i]->sleepers.fetch_sub(1, std::memory_order_acq_rel);
      }
      return true;
    }
  }
  watches->reserve(watches->size() + count);
  for (size_t i = 0; i < count; ++i) {
    SanSocket& s = *sockets[i];
    const int fd = s.fd.load();
    SleepWatch w{&s,
                 s.id,
                 fd,
                 WakeFdOf(s),
                 !s.tcp_gone.load() && !s.stream->GetReadiness().peer_closed,
                 fds->size()};
    fds->push_back(pollfd{s.stream->endpoint().notify_fd(), POLLIN, 0});
    fds->push_back(pollfd{w.wake, POLLIN, 0});  // a negative fd is ignored by poll
    fds->push_back(pollfd{w.watch_tcp ? fd : -1, POLLIN | POLLRDHUP, 0});
    watches->push_back(w);
  }
  return false;
}

void FinishSleep(const std::vector<SleepWatch>& watches, const std::vector<pollfd>& fds,
                 const SocketTable* revalidate) {
  for (const SleepWatch& w : watches) {
    if (revalidate && (revalidate->Find(w.fd) != w.socket || w.socket->id != w.id)) continue;
    SanSocket& s = *w.socket;
    if (fds[w.first].revents) {
      s.stream->endpoint().ClearNotify();
      // Another thread sleeping on the same doorbell may have missed it now.
      if (w.wake >= 0 && s.sleepers.load(std::memory_order_acquire) > 1) eventfd_write(w.wake, 1);
    }
    if (fds[w.first + 1].revents) {
      eventfd_t v;
      eventfd_read(w.wake, &v);
    }
    if (fds[w.first + 2].revents) CheckKernelSide(s);
    s.sleepers.fetch_sub(1, std::memory_order_acq_rel);
  }
}

int SleepOnSockets(SanSocket* const* sockets, const short* events, size_t count, pollfd* kernel_fds,
                   nfds_t kernel_count, int timeout_ms, const sigset_t* sigmask) {
  std::vector<pollfd> fds(kernel_fds, kernel_fds + kernel_count);
  std::vector<SleepWatch> watches;
  if (ArmForSleep(sockets, events, count, &fds, &watches)) return 1;
  const int result = kernel::ppoll(fds.data(), fds.size(), timeout_ms, sigmask);
  const int err = errno;
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
