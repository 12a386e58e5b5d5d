// Data transfer on SAN sockets: send/recv over the stream, spinning then sleeping when they would
// block, with the kernel's partial-transfer, EOF and error semantics.
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "sanlib/common/kernel.h"
#include "sanlib/socket/drive.h"
#include "sanlib/socket/iov_remainder.h"

namespace san {
namespace {

// Flags TCP acts on that a SAN stream cannot honour; any other flag is ignored, as tcp_sendmsg and
// tcp_recvmsg ignore what does not apply to them (libmemcached and sockperf pass MSG_NOSIGNAL to
// recv, for instance).
constexpr int kRefusedSendFlags = MSG_OOB;  // urgent data

// An iovec array on the kernel socket: sockets sanlib does not carry, and the rest of a call
// whose connection continues over the kernel socket.
ssize_t KernelSendIov(int fd, const iovec* iov, int iovcnt, int flags) {
  return kernel::sendv(fd, iov, static_cast<size_t>(iovcnt), flags);
}

ssize_t KernelRecvIov(int fd, const iovec* iov, int iovcnt, int flags) {
  return kernel::recvv(fd, iov, static_cast<size_t>(iovcnt), flags);
}

void RaiseSigpipe(int flags) {
  if (!(flags & MSG_NOSIGNAL)) raise(SIGPIPE);
}

}  // namespace

ssize_t SendIov(int fd, const iovec* iov, int iovcnt, int flags) {
  bool on_tcp = false;
  SanSocket* s = DataSocket(fd, &on_tcp);
  if (!s) return KernelSendIov(fd, iov, iovcnt, flags);
  if (iovcnt < 0 || iovcnt > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  const bool nonblocking = (flags & MSG_DONTWAIT) || s->nonblocking.load(std::memory_order_relaxed);
  // A blocking send returns only when everything is taken (or on error): walk the iovec.
  IovRemainder rest(iov, iovcnt);
  size_t total = 0;
  if (on_tcp) {
    const ssize_t n = LateKernelSend(*s, iov, iovcnt, flags);
    if (n < 0 && errno != kLateSwitched) return n;
    if (n >= 0) {
      // A blocking bulk send whose socket switched after a part: the rest goes over the stream.
      if (rest.Advance(static_cast<size_t>(n)) || nonblocking ||
          s->mode.load(std::memory_order_acquire) != SocketMode::kShm) {
        return n;
      }
      total = static_cast<size_t>(n);
    }
  }
  if (flags & kRefusedSendFlags) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (nonblocking && s->late) AwaitPeerWindow(*s);  // a socket that moved: see late_upgrade.h
  // Single copy: a large request goes straight into a window the receiver advertised, if there is
  // one (the write completes inside the call, so nonblocking sends may use it too).
  const Config& config = Runtime::Get().config();
  const size_t window_min = config.single_copy ? config.single_copy_min : 0;
  CallDeadline deadline;
  for (;;) {
    bool buffered = false;
    Result<size_t> r = Drive(*s, true, nonblocking, &deadline, [&] {
      return AfterMove(*s, s->stream->Send(rest.data(), rest.count(), &buffered, window_min));
    });
    if (MovedOn(r)) {
      return KernelRest(static_cast<ssize_t>(total),
                        KernelSendIov(fd, rest.data(), rest.count(), flags));
    }
    if (buffered && s->stream->TryArmTimer()) Runtime::Get().closer().ArmTimer(s->stream.get());
    if (!r.ok()) {
      if (total > 0) return static_cast<ssize_t>(total);
      int err = r.status().code();
      if (err != EAGAIN && err != EINTR) err = ConnectionErrno(*s, err, true);
      if (err == EPIPE) RaiseSigpipe(flags);
      errno = err;
      return -1;
    }
    total += r.value();
    if (rest.Advance(r.value()) || nonblocking) return static_cast<ssize_t>(total);
  }
}

namespace {

// RecvIov on a socket sanlib carries (`on_tcp`: a candidate still on kernel TCP).
ssize_t RecvFrom(SanSocket* s, bool on_tcp, int fd, const iovec* iov, int iovcnt, int flags) {
  if (on_tcp) {
    const ssize_t n = LateKernelRecv(*s, iov, iovcnt, flags);
    if (n >= 0 || errno != kLateSwitched) return n;
  }
  if (flags & MSG_OOB) {
    errno = EINVAL;  // no urgent data on a SAN stream, as on a TCP socket without any
    return -1;
  }
  if (flags & MSG_ERRQUEUE) {
    errno = EAGAIN;  // a SAN stream queues no errors: the kernel's answer for an empty queue
    return -1;
  }
  if (iovcnt < 0 || iovcnt > IOV_MAX) {
    errno = EINVAL;
    return -1;
  }
  size_t want = 0;
  for (int i = 0; i < iovcnt; ++i) want += iov[i].iov_len;
  // A zero-length read waits like any other (for data, EOF or an error; EAGAIN if nonblocking)
  // and then returns 0, as tcp_recvmsg does: a one-byte peek stands in for it.
  char probe_byte;
  const iovec probe{&probe_byte, 1};
  const bool probing = want == 0;
  if (probing) {
    iov = &probe;
    iovcnt = 1;
  }
  // After shutdown(SHUT_RD) Linux still delivers what is queued (and what arrives later); only an
  // empty queue reads as EOF instead of blocking.
  const bool read_shut = s->read_shut.load();
  const bool peek = (flags & MSG_PEEK) || probing;
  const bool nonblocking =
      read_shut || (flags & MSG_DONTWAIT) || s->nonblocking.load(std::memory_order_relaxed);
  const bool waitall = (flags & MSG_WAITALL) && !peek && !nonblocking;
  // Single copy: a blocking, non-peeking read with a large first buffer may expose it to the
  // sender while it waits (never a nonblocking one: the window must be withdrawn before the call
  // returns, and a nonblocking call returns at once). WithdrawWindow runs before every return.
  const Config& config = Runtime::Get().config();
  const size_t offer_min = config.single_copy && !peek && !nonblocking ? config.single_copy_min : 0;
  IovRemainder rest(iov, waitall ? iovcnt : 0);
  size_t total = 0;
  CallDeadline deadline;
  for (;;) {
    const iovec* cur = waitall ? rest.data() : iov;
    const int curcnt = waitall ? rest.count() : iovcnt;
    Result<size_t> r = Drive(*s, false, nonblocking, &deadline, [&]() -> Result<size_t> {
      if (InflowPending(*s)) {
        // The peer's bytes from before its move to shm come first (late_upgrade.h).
        const ssize_t n = InflowRecv(*s, cur, curcnt, peek);
        if (n >= 0) return static_cast<size_t>(n);
        if (errno != kLateSwitched) return Status::FromErrno("recv");
      }
      return AfterMove(*s, s->stream->Recv(cur, curcnt, peek, offer_min));
    });
    if (MovedOn(r)) {
      ssize_t n = KernelRecvIov(fd, cur, curcnt, flags | (read_shut ? MSG_DONTWAIT : 0));
      if (n < 0 && read_shut && (errno == EAGAIN || errno == EWOULDBLOCK)) n = 0;
      if (probing && n >= 0) return 0;
      return KernelRest(static_cast<ssize_t>(total), n);
    }
    if (offer_min != 0 && curcnt > 0) {
      // Timeout, EINTR, an error or data by the ring: take the window back. Bytes the peer wrote
      // into it meanwhile are this call's result (they are the next bytes of the stream).
      Result<size_t> w = s->stream->WithdrawWindow(cur[0].iov_base);
      if (w.ok() ? w.value() > 0 : !r.ok()) r = w;
    }
    if (!r.ok()) return RecvFailed(*s, total, r.status().code(), read_shut);
    size_t n = r.value();
    if (probing) return 0;
    if (!waitall || n == 0) return static_cast<ssize_t>(total + n);  // n == 0: EOF
    total += n;
    if (rest.Advance(n)) return static_cast<ssize_t>(total);
  }
}

}  // namespace

// A read that returns EAGAIN is counted (reads_drained: an edge-triggered epoll member's next
// readiness is a new edge).
ssize_t RecvIov(int fd, const iovec* iov, int iovcnt, int flags) {
  bool on_tcp = false;
  SanSocket* s = DataSocket(fd, &on_tcp);
  if (!s) return KernelRecvIov(fd, iov, iovcnt, flags);
  const ssize_t n = RecvFrom(s, on_tcp, fd, iov, iovcnt, flags);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    s->reads_drained.fetch_add(1, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace san
