// Interposed data calls: read/write and their vector forms, send/recv/sendto/recvfrom/sendmsg/
// recvmsg, sendmmsg/recvmmsg, the _FORTIFY_SOURCE variants (__read_chk, __recv_chk, __recvfrom_chk:
// Debian builds programs with them), and sendfile. On a managed socket they go through sanlib's
// data path (which itself hands TCP-fallback sockets to the kernel); on any other fd straight to
// libc.
#include <errno.h>
#include <limits.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "compat/errno_keeper.h"
#include "compat/managed.h"
#include "compat/real_calls.h"
#include "san/san.h"
#include "sanlib/socket/fd_passing.h"
#include "sanlib/socket/socket_ops.h"

using san::compat::KeepErrno;
using san::compat::Managed;
using san::compat::ManagedData;
using san::compat::Real;

extern "C" [[noreturn]] void __chk_fail(void);

namespace {

// The fds a message passes (SCM_RIGHTS): SAN connections among them move to kernel TCP before the
// kernel passes them (socket/fd_passing.h). Malformed control data is left to the kernel to refuse.
void PrepareRights(const msghdr* msg) {
  if (!msg || !msg->msg_control || msg->msg_controllen < sizeof(cmsghdr)) return;
  auto* m = const_cast<msghdr*>(msg);
  for (cmsghdr* c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0)) {
      continue;
    }
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    std::vector<int> fds(n);
    std::memcpy(fds.data(), CMSG_DATA(c), n * sizeof(int));
    san::PrepareToPass(fds.data(), n, "SCM_RIGHTS");
  }
}

}  // namespace

extern "C" {

ssize_t read(int fd, void* buf, size_t len) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().read(fd, buf, len);
    return san_recv(fd, buf, len, 0);
  });
}

ssize_t __read_chk(int fd, void* buf, size_t len, size_t buflen) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().read_chk(fd, buf, len, buflen);
    if (len > buflen) __chk_fail();
    return san_recv(fd, buf, len, 0);
  });
}

ssize_t write(int fd, const void* buf, size_t len) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().write(fd, buf, len);
    return san_send(fd, buf, len, 0);
  });
}

ssize_t readv(int fd, const iovec* iov, int iovcnt) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().readv(fd, iov, iovcnt);
    return san::RecvIov(fd, iov, iovcnt, 0);
  });
}

ssize_t writev(int fd, const iovec* iov, int iovcnt) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().writev(fd, iov, iovcnt);
    return san::SendIov(fd, iov, iovcnt, 0);
  });
}

ssize_t send(int fd, const void* buf, size_t len, int flags) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().send(fd, buf, len, flags);
    return san_send(fd, buf, len, flags);
  });
}

ssize_t recv(int fd, void* buf, size_t len, int flags) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().recv(fd, buf, len, flags);
    return san_recv(fd, buf, len, flags);
  });
}

ssize_t __recv_chk(int fd, void* buf, size_t len, size_t buflen, int flags) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().recv_chk(fd, buf, len, buflen, flags);
    if (len > buflen) __chk_fail();
    return san_recv(fd, buf, len, flags);
  });
}

// A connected stream socket ignores sendto's address (as TCP does) and reports no source address.
ssize_t sendto(int fd, const void* buf, size_t len, int flags, const sockaddr* addr,
               socklen_t addr_len) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().sendto(fd, buf, len, flags, addr, addr_len);
    return san_send(fd, buf, len, flags);
  });
}

ssize_t recvfrom(int fd, void* buf, size_t len, int flags, sockaddr* addr, socklen_t* addr_len) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().recvfrom(fd, buf, len, flags, addr, addr_len);
    const ssize_t n = san_recv(fd, buf, len, flags);
    if (n >= 0 && addr && addr_len) *addr_len = 0;
    return n;
  });
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t len, size_t buflen, int flags, sockaddr* addr,
                       socklen_t* addr_len) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().recvfrom_chk(fd, buf, len, buflen, flags, addr, addr_len);
    if (len > buflen) __chk_fail();
    return recvfrom(fd, buf, len, flags, addr, addr_len);
  });
}

// Ancillary data has no meaning on a SAN connection (TCP carries none an application can send
// portably): refused with EINVAL rather than dropped silently.
ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) {
      PrepareRights(msg);
      return Real().sendmsg(fd, msg, flags);
    }
    if (msg->msg_controllen > 0) {
      errno = EINVAL;
      return -1;
    }
    return san::SendIov(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
  });
}

ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(fd)) return Real().recvmsg(fd, msg, flags);
    const ssize_t n = san::RecvIov(fd, msg->msg_iov, static_cast<int>(msg->msg_iovlen), flags);
    if (n >= 0) {
      msg->msg_namelen = 0;
      msg->msg_controllen = 0;
      msg->msg_flags = 0;
    }
    return n;
  });
}

// sendmmsg/recvmmsg on a stream socket are the kernel's loops of sendmsg/recvmsg (net/socket.c,
// __sys_sendmmsg/do_recvmmsg), reproduced over the SAN path: an error on the first message is the
// call's; after at least one, the call returns the count. recvmmsg's MSG_WAITFORONE makes every
// receive after the first nonblocking; its timeout is looked at only after each message (as the
// kernel's) and the time left is written back.
int sendmmsg(int fd, mmsghdr* msgs, unsigned int vlen, int flags) {
  return KeepErrno([&]() -> int {
    if (!ManagedData(fd)) {
      for (unsigned int i = 0; i < vlen && msgs; ++i) PrepareRights(&msgs[i].msg_hdr);
      return Real().sendmmsg(fd, msgs, vlen, flags);
    }
    if (vlen > UIO_MAXIOV) vlen = UIO_MAXIOV;
    unsigned int sent = 0;
    bool failed = false;
    for (; sent < vlen; ++sent) {
      const ssize_t n = sendmsg(fd, &msgs[sent].msg_hdr, flags);
      if ((failed = n < 0)) break;
      msgs[sent].msg_len = static_cast<unsigned int>(n);
    }
    return sent > 0 || !failed ? static_cast<int>(sent) : -1;
  });
}

int recvmmsg(int fd, mmsghdr* msgs, unsigned int vlen, int flags, timespec* timeout) {
  return KeepErrno([&]() -> int {
    if (!ManagedData(fd)) return Real().recvmmsg(fd, msgs, vlen, flags, timeout);
    if (timeout &&
        (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000)) {
      errno = EINVAL;
      return -1;
    }
    if (vlen > UIO_MAXIOV) vlen = UIO_MAXIOV;
    timespec end{};
    if (timeout) {
      clock_gettime(CLOCK_MONOTONIC, &end);
      end.tv_sec += timeout->tv_sec;
      end.tv_nsec += timeout->tv_nsec;
      if (end.tv_nsec >= 1000000000) {
        end.tv_sec += 1;
        end.tv_nsec -= 1000000000;
      }
    }
    const int wait_for_one = flags & MSG_WAITFORONE;
    flags &= ~MSG_WAITFORONE;
    unsigned int got = 0;
    bool failed = false;
    while (got < vlen) {
      const ssize_t n = recvmsg(fd, &msgs[got].msg_hdr, flags);
      if ((failed = n < 0)) break;
      msgs[got++].msg_len = static_cast<unsigned int>(n);
      if (wait_for_one) flags |= MSG_DONTWAIT;
      if (timeout) {
        timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long long left_ns = (end.tv_sec - now.tv_sec) * 1000000000LL + (end.tv_nsec - now.tv_nsec);
        if (left_ns < 0) left_ns = 0;
        timeout->tv_sec = static_cast<time_t>(left_ns / 1000000000);
        timeout->tv_nsec = static_cast<long>(left_ns % 1000000000);
        if (left_ns == 0) break;
      }
    }
    return got > 0 || !failed ? static_cast<int>(got) : -1;
  });
}

ssize_t sendfile(int out_fd, int in_fd, off_t* offset, size_t count) {
  return KeepErrno([&]() -> ssize_t {
    if (!ManagedData(out_fd)) return Real().sendfile(out_fd, in_fd, offset, count);
    return san_sendfile(out_fd, in_fd, offset, count);
  });
}

// On 64-bit Linux off_t is 64 bits: sendfile64 is the same call under the large-file name.
ssize_t sendfile64(int out_fd, int in_fd, off_t* offset, size_t count) {
  return KeepErrno([&]() -> ssize_t { return sendfile(out_fd, in_fd, offset, count); });
}

}  // extern "C"
