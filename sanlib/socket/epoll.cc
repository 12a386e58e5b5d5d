// epoll over SAN sockets and kernel fds: san_epoll_* and the compatibility layer's epoll calls
// (socket_ops.h). The instance is a real kernel epoll; a SAN connection's registration is kept by
// its EpollSet (epoll_set.h), every other fd's is the kernel's unchanged. A process that has made
// no SAN socket never gets here past one atomic load per call.
#include <errno.h>

#include "sanlib/common/clock.h"
#include "sanlib/common/kernel.h"
#include "sanlib/socket/epoll_set.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"

namespace san {

int EpollCreate(int flags) {
  const int epfd = kernel::epoll_create1(flags);
  if (epfd >= 0) EpollSet::Created(epfd);
  return epfd;
}

int EpollCtl(int epfd, int op, int fd, epoll_event* event) {
  Runtime* rt = Runtime::IfCreated();
  SanSocket* s = rt ? rt->table().Find(fd) : nullptr;
  // A kernel-TCP connection that may still move to shm (late_upgrade.h) is the set's too: its
  // kernel registration serves until it moves.
  if (!s || s->listening.load()) {
    // A SAN socket closed since and its number reused: its old registration went with it.
    if (EpollSet::Involved(epfd)) EpollSet::DropFd(epfd, fd);
    return kernel::epoll_ctl(epfd, op, fd, event);
  }
  // A connection that moved to kernel TCP (or never left it, and never will): registered while it
  // was on shm, its registration is the set's, handed to the kernel now.
  if (KernelAlone(*s)) {
    if (EpollSet::Involved(epfd)) return EpollSet::ControlKernelSocket(epfd, op, fd, *s, event);
    return kernel::epoll_ctl(epfd, op, fd, event);
  }
  return EpollSet::Control(epfd, op, fd, *s, event);
}

int EpollWait(int epfd, epoll_event* events, int max_events, int timeout_ms,
              const sigset_t* sigmask, KernelEpollWaits kernel_waits) {
  if (EpollSet::KernelCanWait(epfd)) {
    return EpollSet::KernelWait(epfd, events, max_events, timeout_ms, sigmask, kernel_waits);
  }
  return EpollSet::Wait(epfd, events, max_events, timeout_ms, sigmask, kernel_waits);
}

int EpollWait2(int epfd, epoll_event* events, int max_events, const timespec* timeout,
               const sigset_t* sigmask, KernelEpollWaits kernel_waits) {
  if (!EpollSet::Involved(epfd)) {
    const int n = kernel_waits.pwait2(epfd, events, max_events, timeout, sigmask);
    const int kept = n > 0 ? EpollSet::DropKicks(events, n) : n;
    // Only our kick: SAN members arrived meanwhile; they are served below, with the full timeout
    // again (a kick ends a sleep early, so the call can only last longer, never return too soon).
    if (kept != 0 || n == 0) return kept;
  }
  if (timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000)) {
    errno = EINVAL;
    return -1;
  }
  // The set sleeps by the millisecond: rounded up, never shorter.
  return EpollSet::Wait(epfd, events, max_events, TimeoutMs(timeout), sigmask, kernel_waits);
}

void EpollClosed(int fd) { EpollSet::Forget(fd); }

}  // namespace san
