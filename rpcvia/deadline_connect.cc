#include "rpcvia/deadline_connect.h"

#include <poll.h>
#include <san/san.h>

#include <cerrno>

#include "sanlib/common/clock.h"

namespace san::rpcvia {

uint64_t DeadlineAfter(const timeval& tv) {
  return NowNs() + static_cast<uint64_t>(tv.tv_sec) * 1000000000u +
         static_cast<uint64_t>(tv.tv_usec) * 1000u;
}

int ConnectBy(int fd, const sockaddr* addr, socklen_t len, uint64_t deadline_ns) {
  if (san_connect(fd, addr, len) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  for (;;) {
    const uint64_t now = NowNs();
    if (now >= deadline_ns) return ETIMEDOUT;
    pollfd p{fd, POLLOUT, 0};
    const int rc = san_poll(&p, 1, static_cast<int>((deadline_ns - now + 999999) / 1000000));
    if (rc > 0) break;
    if (rc < 0 && errno != EINTR) return errno;
  }
  int err = 0;
  socklen_t err_len = sizeof err;
  if (san_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) return errno;
  return err;
}

}  // namespace san::rpcvia
