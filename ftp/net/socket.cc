#include "ftp/net/socket.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>

#include <cerrno>

#include "san/san.h"

namespace san::ftp {

Result<Socket> Socket::Listen(const HostPort& addr, int backlog) {
  Socket s(san_socket(addr.family(), SOCK_SAN | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Status::FromErrno("san_socket");
  const int one = 1;
  san_setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (addr.family() == AF_INET6)
    san_setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (san_bind(s.fd(), reinterpret_cast<const sockaddr*>(&addr.addr), addr.len) != 0) {
    return Status::FromErrno("bind");
  }
  if (san_listen(s.fd(), backlog) != 0) return Status::FromErrno("listen");
  return s;
}

Result<Socket> Socket::Connect(const HostPort& addr, int timeout_ms, const HostPort* bind_addr) {
  Socket s(san_socket(addr.family(), SOCK_SAN | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Status::FromErrno("san_socket");
  if (bind_addr) {
    const int one = 1;
    san_setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (san_bind(s.fd(), reinterpret_cast<const sockaddr*>(&bind_addr->addr), bind_addr->len) !=
        0) {
      return Status::FromErrno("bind");
    }
  }
  // Nonblocking connect so a dead address cannot hold us past the timeout.
  const int flags = san_fcntl(s.fd(), F_GETFL);
  san_fcntl(s.fd(), F_SETFL, flags | O_NONBLOCK);
  if (san_connect(s.fd(), reinterpret_cast<const sockaddr*>(&addr.addr), addr.len) != 0) {
    if (errno != EINPROGRESS) return Status::FromErrno("connect");
    pollfd p{s.fd(), POLLOUT, 0};
    const int n = san_poll(&p, 1, timeout_ms);
    if (n == 0) return Status(ETIMEDOUT, "connect");
    if (n < 0) return Status::FromErrno("poll(connect)");
    int err = 0;
    socklen_t len = sizeof err;
    san_getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return Status(err, "connect");
  }
  san_fcntl(s.fd(), F_SETFL, flags);
  return s;
}

Result<Socket> Socket::Accept(int timeout_ms, HostPort* peer) const {
  pollfd p{fd_, POLLIN, 0};
  const int n = san_poll(&p, 1, timeout_ms);
  if (n == 0) return Status(EAGAIN, "accept: timed out");
  if (n < 0) return Status::FromErrno("poll(accept)");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  const int fd = san_accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
  if (fd < 0) return Status::FromErrno("accept");
  if (peer) *peer = MakeHostPort(reinterpret_cast<sockaddr*>(&ss), len);
  return Socket(fd);
}

Status Socket::SendAll(const void* data, size_t len, int timeout_ms) const {
  // Try first, wait only when the socket would block: a poll per call would cost a syscall (or a
  // SAN poll) per chunk on a path that is usually ready.
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t sent = san_send(fd_, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      p += sent;
      len -= static_cast<size_t>(sent);
      continue;
    }
    if (sent < 0 && errno != EAGAIN && errno != EINTR) return Status::FromErrno("send");
    pollfd pf{fd_, POLLOUT, 0};
    const int n = san_poll(&pf, 1, timeout_ms);
    if (n == 0) return Status(ETIMEDOUT, "send");
    if (n < 0 && errno != EINTR) return Status::FromErrno("poll(send)");
  }
  return Status::Ok();
}

Result<size_t> Socket::Recv(void* buf, size_t len, int timeout_ms) const {
  while (true) {
    const ssize_t got = san_recv(fd_, buf, len, MSG_DONTWAIT);
    if (got >= 0) return static_cast<size_t>(got);
    if (errno != EAGAIN && errno != EINTR) return Status::FromErrno("recv");
    pollfd pf{fd_, POLLIN, 0};
    const int n = san_poll(&pf, 1, timeout_ms);
    if (n == 0) return Status(ETIMEDOUT, "recv");
    if (n < 0 && errno != EINTR) return Status::FromErrno("poll(recv)");
  }
}

Result<size_t> Socket::RecvWaiting(void* buf, size_t len) const {
  const ssize_t got = san_recv(fd_, buf, len, 0);
  if (got >= 0) return static_cast<size_t>(got);
  if (errno == EAGAIN || errno == EWOULDBLOCK) return Status(ETIMEDOUT, "recv");
  return Status::FromErrno("recv");
}

Status Socket::SetReceiveTimeout(int timeout_ms) const {
  timeval tv{};
  tv.tv_sec = timeout_ms / 1000;
  tv.tv_usec = (timeout_ms % 1000) * 1000;
  if (san_setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
    return Status::FromErrno("setsockopt(SO_RCVTIMEO)");
  }
  return Status::Ok();
}

Result<size_t> Socket::SendSome(const void* data, size_t len) const {
  const ssize_t sent = san_send(fd_, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent >= 0) return static_cast<size_t>(sent);
  if (errno == EAGAIN || errno == EINTR) return static_cast<size_t>(0);
  return Status::FromErrno("send");
}

Result<size_t> Socket::SendFile(int file_fd, off_t* offset, size_t len) const {
  const ssize_t sent = san_sendfile(fd_, file_fd, offset, len);
  if (sent >= 0) return static_cast<size_t>(sent);
  const int err = errno;
  if (err == EAGAIN || err == EWOULDBLOCK) return Status(EAGAIN, "sendfile");
  if (err == EINTR) return Status(EINTR, "sendfile");
  return Status(err, IsConnectionErrno(err) ? "sendfile" : kLocalFileCall);
}

namespace {

// san_recvfile reports the socket's errors and the file's in one errno. These are the ones recv(2)
// never gives on a connected stream socket but write(2) on a file does.
bool IsFileErrno(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
    case EIO:
    case EBADF:
    case EINVAL:
    case EPERM:
    case EROFS:
    case EISDIR:
    case ENXIO:
    case EOVERFLOW:
    case EPIPE:  // -o - into a pipe whose reader left
      return true;
    default:
      return false;
  }
}

Status ErrorOf(int err, const char* call) {
  if (err == EAGAIN || err == EWOULDBLOCK) return Status(EAGAIN, call);
  return Status(err, IsFileErrno(err) ? kLocalFileCall : call);
}

}  // namespace

Result<size_t> Socket::RecvToFile(int file_fd, size_t len) const {
  const ssize_t got = san_recvfile(fd_, file_fd, nullptr, len);
  if (got >= 0) return static_cast<size_t>(got);
  return ErrorOf(errno, "recvfile");
}

Status Socket::SetNonBlocking(bool on) const {
  const int flags = san_fcntl(fd_, F_GETFL);
  if (flags < 0) return Status::FromErrno("fcntl");
  const int want = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
  if (want != flags && san_fcntl(fd_, F_SETFL, want) != 0) return Status::FromErrno("fcntl");
  return Status::Ok();
}

Result<size_t> Socket::RecvSome(void* buf, size_t len) const {
  const ssize_t got = san_recv(fd_, buf, len, MSG_DONTWAIT);
  if (got >= 0) return static_cast<size_t>(got);
  if (errno == EAGAIN || errno == EINTR) return Status(EAGAIN, "recv");
  return Status::FromErrno("recv");
}

int WaitEither(const Socket& a, short a_events, const Socket& b, int timeout_ms, bool* a_ready,
               bool* b_ready) {
  pollfd p[2] = {{a.fd(), a_events, 0}, {b.fd(), POLLIN, 0}};
  const int n = san_poll(p, 2, timeout_ms);
  if (n <= 0) return n < 0 && errno == EINTR ? 0 : n;
  *a_ready = p[0].revents != 0;
  *b_ready = p[1].revents != 0;
  return n;
}

bool Socket::Readable(int timeout_ms) const {
  pollfd pf{fd_, POLLIN, 0};
  return san_poll(&pf, 1, timeout_ms) > 0;
}

bool Socket::Writable(int timeout_ms) const {
  pollfd pf{fd_, POLLOUT, 0};
  return san_poll(&pf, 1, timeout_ms) > 0;
}

HostPort Socket::LocalAddress() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  san_getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  return MakeHostPort(reinterpret_cast<sockaddr*>(&ss), len);
}

HostPort Socket::PeerAddress() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  san_getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  return MakeHostPort(reinterpret_cast<sockaddr*>(&ss), len);
}

std::string Socket::Mode() const {
  if (!san_is_socket(fd_)) return "kernel";
  san_info info{};
  if (san_getinfo(fd_, &info) != 0) return "unknown";
  switch (info.mode) {
    case SAN_MODE_SHM:
      return "shm";
    case SAN_MODE_VERBS:
      return "verbs";
    case SAN_MODE_TCP: {
      std::string out = "tcp";
      if (info.fallback[0]) out.append(" (").append(info.fallback).append(")");
      return out;
    }
    default:
      return "none";
  }
}

bool Socket::Accelerated() const {
  san_info info{};
  return san_is_socket(fd_) && san_getinfo(fd_, &info) == 0 &&
         (info.mode == SAN_MODE_SHM || info.mode == SAN_MODE_VERBS);
}

Status Socket::Upgrade() const {
  if (san_upgrade(fd_) != 0) return Status::FromErrno("san_upgrade");
  return Status::Ok();
}

void Socket::SetNoDelay() const {
  const int one = 1;
  san_setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void Socket::ShutdownWrite() const {
  if (fd_ >= 0) san_shutdown(fd_, SHUT_WR);
}

void Socket::ResetOnClose() const {
  const linger reset{1, 0};
  san_setsockopt(fd_, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
}

void Socket::Close() {
  if (fd_ >= 0) san_close(std::exchange(fd_, -1));
}

void IgnoreSigpipe() { signal(SIGPIPE, SIG_IGN); }

}  // namespace san::ftp
