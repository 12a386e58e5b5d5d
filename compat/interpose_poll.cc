// Interposed readiness calls: poll, ppoll, select, pselect (and the _FORTIFY_SOURCE __poll_chk,
// __ppoll_chk). A set with no SAN connection in it goes to libc untouched; otherwise sanlib's poll
// (socket/poll.cc) answers for SAN sockets and the kernel for the rest, in one call. A kernel TCP
// connection that may still move to shm (a late candidate: socket/late_upgrade.h) counts as a SAN
// one: it may move while the program sleeps, and a switching peer's wake byte is no readiness.
// select and pselect are expressed as poll, with their own results: counts of set bits, EBADF for a
// closed fd (POLLNVAL), and select's timeout updated to the time left, as Linux does.
#include <errno.h>
#include <sys/select.h>

#include <climits>
#include <vector>

#include "compat/errno_keeper.h"
#include "compat/managed.h"
#include "compat/real_calls.h"
#include "sanlib/common/clock.h"
#include "sanlib/socket/socket_ops.h"

using san::TimeoutMs;
using san::compat::KeepErrno;
using san::compat::ManagedData;
using san::compat::Real;

extern "C" [[noreturn]] void __chk_fail(void);

namespace {

bool AnySan(const pollfd* fds, nfds_t n) {
  if (!san::Runtime::IfCreated()) return false;
  for (nfds_t i = 0; i < n; ++i) {
    if (ManagedData(fds[i].fd)) return true;
  }
  return false;
}

bool AnySanIn(int nfds, const fd_set* r, const fd_set* w, const fd_set* e) {
  if (!san::Runtime::IfCreated()) return false;
  for (int fd = 0; fd < nfds && fd < FD_SETSIZE; ++fd) {
    if (((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e))) &&
        ManagedData(fd)) {
      return true;
    }
  }
  return false;
}

// select over poll. The readiness rules are the kernel's (fs/select.c): readable on
// POLLIN|POLLHUP|POLLERR, writable on POLLOUT|POLLERR, exceptional on POLLPRI.
int SelectOverPoll(int nfds, fd_set* r, fd_set* w, fd_set* e, int timeout_ms,
                   const sigset_t* sigmask) {
  if (nfds < 0) {
    errno = EINVAL;
    return -1;
  }
  std::vector<pollfd> fds;
  for (int fd = 0; fd < nfds && fd < FD_SETSIZE; ++fd) {
    short events = 0;
    if (r && FD_ISSET(fd, r)) events |= POLLIN;
    if (w && FD_ISSET(fd, w)) events |= POLLOUT;
    if (e && FD_ISSET(fd, e)) events |= POLLPRI;
    if (events) fds.push_back(pollfd{fd, events, 0});
  }
  const int rc = san::Poll(fds.data(), fds.size(), timeout_ms, sigmask);
  if (rc < 0) return -1;
  for (const pollfd& p : fds) {
    if (p.revents & POLLNVAL) {
      errno = EBADF;
      return -1;
    }
  }
  if (r) FD_ZERO(r);
  if (w) FD_ZERO(w);
  if (e) FD_ZERO(e);
  int count = 0;
  for (const pollfd& p : fds) {
    if (r && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
      FD_SET(p.fd, r);
      ++count;
    }
    if (w && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR))) {
      FD_SET(p.fd, w);
      ++count;
    }
    if (e && (p.events & POLLPRI) && (p.revents & POLLPRI)) {
      FD_SET(p.fd, e);
      ++count;
    }
  }
  return count;
}

}  // namespace

// glibc declares poll/ppoll's array write-only (a fortify access attribute), so reading the
// events the caller put there looks "uninitialized" to GCC inside a definition of poll itself.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

extern "C" {

int poll(pollfd* fds, nfds_t nfds, int timeout_ms) {
  return KeepErrno([&]() -> int {
    if (!AnySan(fds, nfds)) return Real().poll(fds, nfds, timeout_ms);
    return san::Poll(fds, nfds, timeout_ms);
  });
}

int __poll_chk(pollfd* fds, nfds_t nfds, int timeout_ms, size_t fds_len) {
  return KeepErrno([&]() -> int {
    if (fds_len / sizeof(pollfd) < nfds) __chk_fail();
    return poll(fds, nfds, timeout_ms);
  });
}

int ppoll(pollfd* fds, nfds_t nfds, const timespec* timeout, const sigset_t* sigmask) {
  return KeepErrno([&]() -> int {
    if (!AnySan(fds, nfds)) return Real().ppoll(fds, nfds, timeout, sigmask);
    if (timeout &&
        (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000)) {
      errno = EINVAL;
      return -1;
    }
    return san::Poll(fds, nfds, TimeoutMs(timeout), sigmask);
  });
}

int __ppoll_chk(pollfd* fds, nfds_t nfds, const timespec* timeout, const sigset_t* sigmask,
                size_t fds_len) {
  return KeepErrno([&]() -> int {
    if (fds_len / sizeof(pollfd) < nfds) __chk_fail();
    return ppoll(fds, nfds, timeout, sigmask);
  });
}

int select(int nfds, fd_set* r, fd_set* w, fd_set* e, timeval* timeout) {
  return KeepErrno([&]() -> int {
    if (!AnySanIn(nfds, r, w, e)) return Real().select(nfds, r, w, e, timeout);
    if (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0)) {
      errno = EINVAL;
      return -1;
    }
    const int ms = TimeoutMs(timeout);
    const uint64_t start = san::NowNs();
    const int rc = SelectOverPoll(nfds, r, w, e, ms, nullptr);
    if (timeout) {
      // Linux writes back the time not slept.
      const uint64_t spent_us = (san::NowNs() - start) / 1000;
      const uint64_t asked_us = static_cast<uint64_t>(timeout->tv_sec) * 1000000 +
                                static_cast<uint64_t>(timeout->tv_usec);
      const uint64_t left = spent_us >= asked_us ? 0 : asked_us - spent_us;
      timeout->tv_sec = static_cast<time_t>(left / 1000000);
      timeout->tv_usec = static_cast<suseconds_t>(left % 1000000);
    }
    return rc;
  });
}

int pselect(int nfds, fd_set* r, fd_set* w, fd_set* e, const timespec* timeout,
            const sigset_t* sigmask) {
  return KeepErrno([&]() -> int {
    if (!AnySanIn(nfds, r, w, e)) return Real().pselect(nfds, r, w, e, timeout, sigmask);
    if (timeout &&
        (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000)) {
      errno = EINVAL;
      return -1;
    }
    return SelectOverPoll(nfds, r, w, e, TimeoutMs(timeout), sigmask);
  });
}

}  // extern "C"
