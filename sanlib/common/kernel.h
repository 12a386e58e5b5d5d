// san::kernel: the kernel's socket, fd and event calls, made as raw system calls.
//
// sanlib's own use of kernel fds must never re-enter sanlib: once the compatibility layer
// interposes connect(), send(), write(), epoll_create1() and friends, a libc call from inside the
// library would come straight back (an interposed epoll_create1 in the shm fabric took the
// library's private instance for the program's, and nginx deadlocked). Raw syscalls cannot be
// interposed, and they skip the interposer's look-up on the hot path (a doorbell's write). Every
// layer uses these: common, the fabrics, the socket layer. Each returns -1 with errno like its
// libc namesake. They trap through sanlib's own function (raw_syscall.h), not libc's syscall().
// Thread-safety: as the system calls.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "sanlib/common/raw_syscall.h"
#include "sanlib/common/unique_fd.h"

namespace san::kernel {

inline int socket(int domain, int type, int protocol) {
  return static_cast<int>(Syscall(SYS_socket, domain, type, protocol));
}
inline int bind(int fd, const sockaddr* addr, socklen_t len) {
  return static_cast<int>(Syscall(SYS_bind, fd, addr, len));
}
inline int listen(int fd, int backlog) {
  return static_cast<int>(Syscall(SYS_listen, fd, backlog));
}
inline int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  return static_cast<int>(Syscall(SYS_accept4, fd, addr, len, flags));
}
inline int connect(int fd, const sockaddr* addr, socklen_t len) {
  return static_cast<int>(Syscall(SYS_connect, fd, addr, len));
}
inline ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  return Syscall(SYS_sendmsg, fd, msg, flags);
}
inline ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  return Syscall(SYS_recvmsg, fd, msg, flags);
}
inline ssize_t send(int fd, const void* buf, size_t len, int flags) {
  return Syscall(SYS_sendto, fd, buf, len, flags, nullptr, 0);
}
inline ssize_t recv(int fd, void* buf, size_t len, int flags) {
  return Syscall(SYS_recvfrom, fd, buf, len, flags, nullptr, nullptr);
}
// A message header carrying just an iovec array.
inline msghdr IovMessage(const iovec* iov, size_t iovcnt) {
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = iovcnt;
  return m;
}
// An iovec array's send/recv: sendto/recvfrom for a single buffer (the kernel's cheaper path,
// what most programs call), sendmsg/recvmsg otherwise.
inline ssize_t sendv(int fd, const iovec* iov, size_t iovcnt, int flags) {
  if (iovcnt == 1) return kernel::send(fd, iov[0].iov_base, iov[0].iov_len, flags);
  const msghdr m = IovMessage(iov, iovcnt);
  return kernel::sendmsg(fd, &m, flags);
}
inline ssize_t recvv(int fd, const iovec* iov, size_t iovcnt, int flags) {
  if (iovcnt == 1) return kernel::recv(fd, iov[0].iov_base, iov[0].iov_len, flags);
  msghdr m = IovMessage(iov, iovcnt);
  return kernel::recvmsg(fd, &m, flags);
}
inline ssize_t read(int fd, void* buf, size_t len) { return Syscall(SYS_read, fd, buf, len); }
inline ssize_t write(int fd, const void* buf, size_t len) {
  return Syscall(SYS_write, fd, buf, len);
}
inline ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* to,
                      socklen_t to_len) {
  return Syscall(SYS_sendto, fd, buf, len, flags, to, to_len);
}
inline ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  return Syscall(SYS_sendfile, out_fd, in_fd, offset, count);
}
inline int shutdown(int fd, int how) { return static_cast<int>(Syscall(SYS_shutdown, fd, how)); }
inline int close(int fd) { return KernelClose(fd); }
inline int getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  return static_cast<int>(Syscall(SYS_getsockopt, fd, level, name, value, len));
}
inline int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  return static_cast<int>(Syscall(SYS_setsockopt, fd, level, name, value, len));
}
inline int getsockname(int fd, sockaddr* addr, socklen_t* len) {
  return static_cast<int>(Syscall(SYS_getsockname, fd, addr, len));
}
inline int getpeername(int fd, sockaddr* addr, socklen_t* len) {
  return static_cast<int>(Syscall(SYS_getpeername, fd, addr, len));
}
inline int fcntl(int fd, int cmd, long arg = 0) {
  return static_cast<int>(Syscall(SYS_fcntl, fd, cmd, arg));
}
// Whether fd is open and close-on-exec.
inline bool CloseOnExec(int fd) {
  const int flags = fcntl(fd, F_GETFD, 0);
  return flags >= 0 && (flags & FD_CLOEXEC);
}
inline int ioctl(int fd, unsigned long request, void* arg) {
  return static_cast<int>(Syscall(SYS_ioctl, fd, request, arg));
}
// ppoll(2) with poll's millisecond timeout (-1 = forever) and an optional signal mask.
inline int ppoll(pollfd* fds, nfds_t n, int timeout_ms, const sigset_t* sigmask) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  return static_cast<int>(
      Syscall(SYS_ppoll, fds, n, timeout_ms < 0 ? nullptr : &ts, sigmask, _NSIG / 8));
}
inline int poll(pollfd* fds, nfds_t n, int timeout_ms) {
  return ppoll(fds, n, timeout_ms, nullptr);
}
inline int epoll_create1(int flags) { return static_cast<int>(Syscall(SYS_epoll_create1, flags)); }
inline int epoll_ctl(int epfd, int op, int fd, epoll_event* event) {
  return static_cast<int>(Syscall(SYS_epoll_ctl, epfd, op, fd, event));
}
inline int epoll_pwait(int epfd, epoll_event* events, int max_events, int timeout_ms,
                       const sigset_t* sigmask) {
  return static_cast<int>(
      Syscall(SYS_epoll_pwait, epfd, events, max_events, timeout_ms, sigmask, _NSIG / 8));
}
inline int epoll_wait(int epfd, epoll_event* events, int max_events, int timeout_ms) {
  return kernel::epoll_pwait(epfd, events, max_events, timeout_ms, nullptr);
}
// ENOSYS from a kernel older than 5.11.
inline int epoll_pwait2(int epfd, epoll_event* events, int max_events, const timespec* timeout,
                        const sigset_t* sigmask) {
  return static_cast<int>(
      Syscall(SYS_epoll_pwait2, epfd, events, max_events, timeout, sigmask, _NSIG / 8));
}

}  // namespace san::kernel
