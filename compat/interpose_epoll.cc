// Interposed epoll calls: the socket layer's epoll (socket_ops.h EpollCreate/EpollCtl/EpollWait,
// the set of SAN registrations in socket/epoll_set.h). The instance is a real kernel epoll, and so
// is every registration of an fd that is not a SAN connection; epoll_create only tells the set that
// the instance is this process's own (epoll_set.h RegistrationsAreOursLocked). A wait with only
// kernel fds to watch sleeps in libc's epoll_pwait/epoll_pwait2 (cancellation points).
#include "compat/errno_keeper.h"
#include "compat/real_calls.h"
#include "sanlib/socket/socket_ops.h"

using san::compat::KeepErrno;
using san::compat::Real;

namespace {

san::KernelEpollWaits LibcWaits() {
  san::KernelEpollWaits waits;
  waits.pwait = Real().epoll_pwait;
  if (Real().epoll_pwait2) waits.pwait2 = Real().epoll_pwait2;
  return waits;
}

}  // namespace

extern "C" {

int epoll_create1(int flags) {
  return KeepErrno([&] { return san::EpollCreate(flags); });
}

int epoll_create(int size) {
  if (size <= 0) {  // the kernel's check; the size means nothing else since Linux 2.6.8
    errno = EINVAL;
    return -1;
  }
  return epoll_create1(0);
}

int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  return KeepErrno([&] { return san::EpollCtl(epfd, op, fd, event); });
}

int epoll_wait(int epfd, epoll_event* events, int max_events, int timeout_ms) {
  return KeepErrno(
      [&] { return san::EpollWait(epfd, events, max_events, timeout_ms, nullptr, LibcWaits()); });
}

int epoll_pwait(int epfd, epoll_event* events, int max_events, int timeout_ms,
                const sigset_t* sigmask) {
  return KeepErrno(
      [&] { return san::EpollWait(epfd, events, max_events, timeout_ms, sigmask, LibcWaits()); });
}

int epoll_pwait2(int epfd, epoll_event* events, int max_events, const timespec* timeout,
                 const sigset_t* sigmask) {
  return KeepErrno(
      [&] { return san::EpollWait2(epfd, events, max_events, timeout, sigmask, LibcWaits()); });
}

}  // extern "C"
