#include "sanlib/socket/deadline_io.h"

#include <sys/socket.h>

#include <cerrno>

#include "sanlib/common/clock.h"
#include "sanlib/common/kernel.h"

namespace san {

Status WaitFd(int fd, short events, uint64_t deadline_ns) {
  for (;;) {
    const uint64_t now = NowNs();
    if (now >= deadline_ns) return Status(ETIMEDOUT, "kernel socket: deadline");
    pollfd p{fd, events, 0};
    const int rc = kernel::poll(&p, 1, static_cast<int>((deadline_ns - now) / 1000000) + 1);
    if (rc > 0) return Status::Ok();
    if (rc < 0 && errno != EINTR) return Status::FromErrno("poll");
  }
}

Status SendAll(int fd, const std::byte* data, size_t len, uint64_t deadline_ns) {
  while (len > 0) {
    const ssize_t n = kernel::send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      len -= static_cast<size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      Status st = WaitFd(fd, POLLOUT, deadline_ns);
      if (!st.ok()) return st;
    } else {
      return Status::FromErrno("send");
    }
  }
  return Status::Ok();
}

Status RecvAll(int fd, std::byte* data, size_t len, uint64_t deadline_ns) {
  while (len > 0) {
    const ssize_t n = kernel::recv(fd, data, len, MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      len -= static_cast<size_t>(n);
    } else if (n == 0) {
      return Status(ECONNRESET, "kernel socket: peer closed");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      Status st = WaitFd(fd, POLLIN, deadline_ns);
      if (!st.ok()) return st;
    } else {
      return Status::FromErrno("recv");
    }
  }
  return Status::Ok();
}

}  // namespace san
