#include "sanlib/socket/tcp_move.h"

#include <string>

#include <fcntl.h>
#include <poll.h>

#include <cerrno>

#include "sanlib/common/clock.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/deadline_io.h"
#include "sanlib/socket/runtime.h"

namespace san {
namespace {

constexpr int kRelayFlags = MSG_DONTWAIT | MSG_NOSIGNAL;

// The socket is a plain TCP one from now on (the stream stays, for threads that read the mode
// before the change; Release disposes of it).
void TurnTcp(SanSocket& s, const char* why) {
  if (s.turned_tcp.exchange(true)) return;
  s.fallback_reason = why;  // read only once mode says kTcp
  s.mode.store(SocketMode::kTcp, std::memory_order_release);
  Runtime::Get().table().NoteChange();  // epoll sets hand it to the kernel (epoll_set.h)
  SAN_LOG_INFO("fd %d: the connection continues over kernel TCP: %s", s.fd.load(), why);
}

// Waits for the peer's MOVED: spins a little (a peer in a data call answers within
// microseconds), then sleeps on the doorbell in short naps.
Status AwaitMoved(proto::Stream& stream, uint64_t deadline_ns) {
  const uint64_t spin_until = NowNs() + 50000;
  for (;;) {
    Result<bool> acked = stream.MoveAcknowledged();
    if (!acked.ok()) return acked.status();
    if (acked.value()) return Status::Ok();
    const uint64_t now = NowNs();
    if (now >= deadline_ns) return Status(ETIMEDOUT, "move: the peer did not answer");
    if (now < spin_until) continue;
    if (stream.endpoint().Arm()) {
      pollfd p{stream.endpoint().notify_fd(), POLLIN, 0};
      if (kernel::poll(&p, 1, 1) > 0) stream.endpoint().ClearNotify();
    }
  }
}

}  // namespace

ssize_t KernelRelayIo::Peek(void* buf, size_t n) {
  return kernel::recv(fd_, buf, n, MSG_PEEK | MSG_DONTWAIT);
}
ssize_t KernelRelayIo::Consume(void* buf, size_t n) {
  return kernel::recv(fd_, buf, n, MSG_DONTWAIT);
}
ssize_t KernelRelayIo::Write(const void* buf, size_t n) {
  return kernel::send(fd_, buf, n, kRelayFlags);
}
int KernelRelayIo::ShutdownWrite() { return kernel::shutdown(fd_, SHUT_WR); }

Status StartMoveToTcp(SanSocket& s, uint64_t deadline_ns) {
  for (;;) {  // MOVE needs a free receive at the peer: ACKs may hold them all for a moment
    Status st = s.stream->BeginMove();
    if (!st.would_block() || NowNs() >= deadline_ns) return st;
    kernel::poll(nullptr, 0, 1);
  }
}

Status FinishMoveToTcp(SanSocket& s, int kernel_fd, uint64_t deadline_ns, const char* why) {
  proto::Stream& stream = *s.stream;
  Status st = AwaitMoved(stream, deadline_ns);
  if (st.ok()) {
    const proto::TcpHandover handover = stream.TakeForTcp();
    proto::MoveHeader header;
    header.returned = handover.returned.size();
    std::byte bytes[proto::MoveHeader::kSize];
    proto::EncodeMoveHeader(header, bytes);
    const int fd = kernel_fd;
    st = SendAll(fd, bytes, sizeof bytes, deadline_ns);
    if (st.ok()) st = SendAll(fd, handover.returned.data(), handover.returned.size(), deadline_ns);
    if (st.ok()) st = SendAll(fd, handover.unsent.data(), handover.unsent.size(), deadline_ns);
    if (st.ok() && handover.fin) kernel::shutdown(fd, SHUT_WR);
  }
  if (!st.ok()) {
    stream.Fail(ECONNRESET);
    return st;
  }
  Runtime::Get().closer().Forget(&stream);
  if (s.read_shut.load()) kernel::shutdown(kernel_fd, SHUT_RD);
  // The stream stays with the socket (spent) until it is closed, as on the peer's side: a failed
  // exec may find the socket in an epoll set, whose look at it goes through the stream.
  TurnTcp(s, (std::string("moved to kernel TCP: ") + why).c_str());
  return Status::Ok();
}

Status MoveToTcp(SanSocket& s, uint64_t deadline_ns, const char* why) {
  Status st = StartMoveToTcp(s, deadline_ns);
  return st.ok() ? FinishMoveToTcp(s, s.fd.load(), deadline_ns, why) : st;
}

Status AdvanceMoved(SanSocket& s) {
  KernelRelayIo io(s.fd.load());
  Result<bool> done = s.stream->Relay(io);
  if (!done.ok()) {
    // Waiting on the kernel socket: the close thread drives the relay from now on as well, so the
    // peer gets its bytes back even if this program does not touch the socket for a while.
    if (done.status().would_block() && !s.relay_watched.exchange(true)) {
      UniqueFd copy(DupHigh(s.fd.load()));
      if (copy.valid()) Runtime::Get().closer().WatchRelay(s.stream.get(), std::move(copy));
    }
    return done.status();
  }
  if (s.stream->Available() == 0) {
    // The peer's reason (an exec into a program without sanlib, its fd passed to another
    // process) is not on the wire.
    TurnTcp(s, "the peer moved the connection to kernel TCP");
  }
  return Status::Ok();
}

}  // namespace san
