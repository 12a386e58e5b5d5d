// The public C API (<san/san.h>): thin extern "C" wrappers over the socket layer. Nothing throws
// across this boundary (sanlib uses no exceptions; allocation failure aborts, as in libc).
#include <fcntl.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "san/san.h"
#include "sanlib/common/kernel.h"
#include "sanlib/socket/file_transfer.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"

extern "C" {

int san_socket(int domain, int type, int protocol) {
  return san::SocketCreate(domain, type, protocol);
}
int san_bind(int fd, const struct sockaddr* addr, socklen_t len) {
  return san::kernel::bind(fd, addr, len);
}
int san_listen(int fd, int backlog) { return san::Listen(fd, backlog); }
int san_accept(int fd, struct sockaddr* addr, socklen_t* len) {
  return san::Accept(fd, addr, len, 0);
}
int san_accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  return san::Accept(fd, addr, len, flags);
}
int san_connect(int fd, const struct sockaddr* addr, socklen_t len) {
  return san::Connect(fd, addr, len);
}

ssize_t san_send(int fd, const void* buf, size_t len, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  return san::SendIov(fd, &iov, 1, flags);
}
ssize_t san_recv(int fd, void* buf, size_t len, int flags) {
  iovec iov{buf, len};
  return san::RecvIov(fd, &iov, 1, flags);
}
// read/write and their vector forms accept any fd, as their libc namesakes do.
ssize_t san_readv(int fd, const struct iovec* iov, int iovcnt) {
  if (!san_is_socket(fd)) return san::Syscall(SYS_readv, fd, iov, iovcnt);
  return san::RecvIov(fd, iov, iovcnt, 0);
}
ssize_t san_writev(int fd, const struct iovec* iov, int iovcnt) {
  if (!san_is_socket(fd)) return san::Syscall(SYS_writev, fd, iov, iovcnt);
  return san::SendIov(fd, iov, iovcnt, 0);
}
ssize_t san_read(int fd, void* buf, size_t len) {
  iovec iov{buf, len};
  return san_readv(fd, &iov, 1);
}
ssize_t san_write(int fd, const void* buf, size_t len) {
  iovec iov{const_cast<void*>(buf), len};
  return san_writev(fd, &iov, 1);
}

ssize_t san_recvfile(int sock, int out_fd, off_t* offset, size_t count) {
  return san::RecvToFile(sock, out_fd, offset, count);
}
ssize_t san_sendfile(int sock, int in_fd, off_t* offset, size_t count) {
  return san::SendFromFile(sock, in_fd, offset, count);
}

int san_shutdown(int fd, int how) { return san::Shutdown(fd, how); }
int san_close(int fd) { return san::Close(fd); }

int san_getsockopt(int fd, int level, int name, void* value, socklen_t* len) {
  return san::GetSockOpt(fd, level, name, value, len);
}
int san_setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  return san::SetSockOpt(fd, level, name, value, len);
}
int san_getsockname(int fd, struct sockaddr* addr, socklen_t* len) {
  return san::kernel::getsockname(fd, addr, len);
}
int san_getpeername(int fd, struct sockaddr* addr, socklen_t* len) {
  return san::kernel::getpeername(fd, addr, len);
}
int san_fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  const long arg = va_arg(ap, long);  // every command we pass on takes an int or nothing
  va_end(ap);
  return san::Fcntl(fd, cmd, arg);
}
int san_poll(struct pollfd* fds, nfds_t nfds, int timeout_ms) {
  return san::Poll(fds, nfds, timeout_ms);
}
int san_epoll_create1(int flags) { return san::EpollCreate(flags); }
int san_epoll_ctl(int epfd, int op, int fd, struct epoll_event* event) {
  return san::EpollCtl(epfd, op, fd, event);
}
int san_epoll_wait(int epfd, struct epoll_event* events, int max_events, int timeout_ms) {
  return san::EpollWait(epfd, events, max_events, timeout_ms);
}
int san_epoll_pwait(int epfd, struct epoll_event* events, int max_events, int timeout_ms,
                    const sigset_t* sigmask) {
  return san::EpollWait(epfd, events, max_events, timeout_ms, sigmask);
}

int san_upgrade(int fd) { return san::Upgrade(fd); }
int san_is_socket(int fd) { return san::Runtime::Get().table().Find(fd) != nullptr; }
int san_getinfo(int fd, struct san_info* info) { return san::GetInfo(fd, info); }

}  // extern "C"
