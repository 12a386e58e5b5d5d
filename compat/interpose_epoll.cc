// Interposed epoll calls. epoll_create/epoll_create1 are libc's (the instance is a real kernel
// epoll); epoll_ctl on a SAN connection and epoll_wait/epoll_pwait/epoll_pwait2 on a set holding
// one go through EpollSet (epoll_set.h); everything else is libc's unchanged. epoll_pwait2's
// nanosecond timeout is rounded up to the millisecond EpollSet sleeps by (never shorter).
#include <errno.h>
#include <limits.h>

#include "compat/epoll_set.h"
#include "compat/errno_keeper.h"
#include "compat/managed.h"
#include "compat/real_calls.h"

using san::compat::EpollSet;
using san::compat::KeepErrno;
using san::compat::Managed;
using san::compat::Real;

extern "C" {

int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  return KeepErrno([&]() -> int {
    san::SanSocket* s = Managed(fd);
    // A kernel-TCP connection that may still move to shm (late_upgrade.h) is the set's too: its
    // kernel registration serves until it moves.
    if (!s || s->listening.load() ||
        (s->mode.load() == san::SocketMode::kTcp && !san::SanlibCarries(*s))) {
      // A SAN socket closed since and its number reused: its old registration went with it.
      if (EpollSet::Involved(epfd)) EpollSet::DropFd(epfd, fd);
      return Real().epoll_ctl(epfd, op, fd, event);
    }
    return EpollSet::Control(epfd, op, fd, *s, event);
  });
}

int epoll_wait(int epfd, epoll_event* events, int max_events, int timeout_ms) {
  return KeepErrno([&]() -> int {
    if (!EpollSet::Involved(epfd)) {
      return EpollSet::KernelWait(epfd, events, max_events, timeout_ms, nullptr);
    }
    return EpollSet::Wait(epfd, events, max_events, timeout_ms, nullptr);
  });
}

int epoll_pwait(int epfd, epoll_event* events, int max_events, int timeout_ms,
                const sigset_t* sigmask) {
  return KeepErrno([&]() -> int {
    if (!EpollSet::Involved(epfd)) {
      return EpollSet::KernelWait(epfd, events, max_events, timeout_ms, sigmask);
    }
    return EpollSet::Wait(epfd, events, max_events, timeout_ms, sigmask);
  });
}

int epoll_pwait2(int epfd, epoll_event* events, int max_events, const timespec* timeout,
                 const sigset_t* sigmask) {
  return KeepErrno([&]() -> int {
    if (!Real().epoll_pwait2) {
      errno = ENOSYS;
      return -1;
    }
    if (!EpollSet::Involved(epfd)) {
      const int n = Real().epoll_pwait2(epfd, events, max_events, timeout, sigmask);
      const int kept = n > 0 ? EpollSet::DropKicks(events, n) : n;
      // Only our kick: SAN members arrived meanwhile; they are served below, with the full timeout
      // again (a kick ends a sleep early, so the call can only last longer, never return too soon).
      if (kept != 0 || n == 0) return kept;
    }
    if (timeout &&
        (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000)) {
      errno = EINVAL;
      return -1;
    }
    int ms = -1;
    if (timeout) {
      const long long total = timeout->tv_sec * 1000LL + (timeout->tv_nsec + 999999) / 1000000;
      ms = total > INT_MAX ? INT_MAX : static_cast<int>(total);
    }
    return EpollSet::Wait(epfd, events, max_events, ms, sigmask);
  });
}

}  // extern "C"
