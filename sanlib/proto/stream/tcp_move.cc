// Moving a connection to its kernel TCP socket (stream.h "Moving to TCP"): the mover's MOVE and
// the peer's MOVED, the mover's handover of what the kernel socket must carry, and the peer's
// relay of returned and unposted bytes over the kernel socket.
#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "sanlib/proto/stream.h"
#include "sanlib/proto/stream/locked.h"
#include "sanlib/proto/wire.h"

namespace san::proto {

using stream::kDirectTag;
using stream::kMaxReceives;
using stream::kRelayDone;
using stream::kRelayEcho;
using stream::kRelayHeader;
using stream::kRelayUnsent;
using stream::RecvEntry;

namespace {

constexpr size_t kRelayChunk = 16384;

}  // namespace

Status Stream::Locked::OnMove(uint32_t buffer, uint32_t length) {
  if (length != 0) return Violation();
  if (sh_.move.sent) {  // both sides moving at once: neither can
    Repost(buffer);
    return Fail(ECONNRESET);
  }
  sh_.move.peer_moved = true;
  sh_.move.moved_owed = true;
  sh_.move.relay_waits.store(POLLIN, std::memory_order_relaxed);  // for the header
  sh_.single_copy.adv_valid = false;
  sh_.move.moved.store(true, std::memory_order_release);
  return Repost(buffer);
}

Status Stream::Locked::OnMoved(uint32_t buffer, uint32_t length) {
  if (length != 0 || !sh_.move.sent) return Violation();
  sh_.move.acked = true;
  return Repost(buffer);
}

Status Stream::BeginMove() {
  Locked l(*this);
  StreamShared& sh = l.sh();
  l.Progress();
  if (sh.link.error) return l.Error();
  if (!sh.link.wakeup_received) return Status(ENOTCONN, "move: connection not open");
  if (sh.move.peer_moved) return Status(EBUSY, "move: the peer is moving");
  if (sh.move.sent) return Status::Ok();
  l.FlushCombined();  // without credit the bytes go in the handover instead
  Status st = l.PostPacket(PacketType::kMove, nullptr, 0, kDirectTag, false);
  if (!st.ok()) return st;
  sh.move.sent = true;
  sh.single_copy.adv_valid = false;
  sh.move.moved.store(true, std::memory_order_release);
  return Status::Ok();
}

Result<bool> Stream::MoveAcknowledged() {
  Locked l(*this);
  l.Reap();
  if (l.sh().link.error) return l.Error();
  return l.sh().move.acked;
}

TcpHandover Stream::TakeForTcp() {
  Locked l(*this);
  StreamShared& sh = l.sh();
  l.Reap();
  TcpHandover h;
  for (uint32_t i = 0; i < sh.recv.count; ++i) {
    const RecvEntry& e = sh.recv.entries[(sh.recv.head + i) % kMaxReceives];
    const std::byte* from = l.RecvBuffer(e.buffer) + e.offset;
    h.returned.insert(h.returned.end(), from, from + (e.length - e.offset));
  }
  sh.recv.count = 0;
  if (sh.staging.fill_len > 0) {
    const std::byte* from = l.Slot(sh.staging.fill_slot);
    h.unsent.assign(from, from + sh.staging.fill_len);
    sh.staging.fill_len = 0;
    sh.staging.fill_slot = -1;
  }
  h.fin = sh.link.close.fin_sent();
  sh.move.handed_over = true;
  return h;
}

Result<bool> Stream::Relay(RelayIo& io) {
  Locked l(*this);
  StreamShared& sh = l.sh();
  l.Progress();  // our MOVED first: the mover writes nothing on the kernel socket before it
  if (sh.move.handed_over) return true;  // we moved: there is nothing to relay
  if (!sh.move.peer_moved) return Status(EINVAL, "relay: the peer did not move");
  if (sh.link.error) return l.Error();
  if (sh.move.moved_owed) return Status(EAGAIN, "relay: MOVED not posted yet");
  // `waits`: the kernel socket event that lets this step go on.
  auto kernel_error = [&](const char* what, short waits) -> Status {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      sh.move.relay_waits.store(waits, std::memory_order_relaxed);
      return Status(EAGAIN, what);
    }
    return l.Fail(ECONNRESET);
  };
  sh.move.relay_waits.store(POLLIN, std::memory_order_relaxed);
  std::byte chunk[kRelayChunk];
  if (sh.move.relay_phase == kRelayHeader) {
    const ssize_t n = io.Peek(chunk, MoveHeader::kSize);
    if (n < 0) return kernel_error("relay: header", POLLIN);
    if (n == 0) return l.Fail(ECONNRESET);  // the mover gave up before its header
    if (static_cast<size_t>(n) < MoveHeader::kSize) return Status(EAGAIN, "relay: header");
    Result<MoveHeader> h = DecodeMoveHeader(chunk, MoveHeader::kSize);
    // We cannot have more bytes in the mover's hands than a full window of our packets.
    if (!h.ok() || h->returned > uint64_t{sh.link.window.window()} * l.PacketMax()) {
      return l.Fail(ECONNRESET);
    }
    if (io.Consume(chunk, MoveHeader::kSize) != static_cast<ssize_t>(MoveHeader::kSize)) {
      return l.Fail(ECONNRESET);
    }
    sh.move.relay_left = h->returned;
    sh.move.relay_phase = kRelayEcho;
  }
  while (sh.move.relay_phase == kRelayEcho && sh.move.relay_left > 0) {
    // Peek, write what the kernel takes, then consume exactly that: nothing is held here, so a
    // partial write leaves the rest where it was.
    const ssize_t n = io.Peek(chunk, std::min<uint64_t>(sizeof chunk, sh.move.relay_left));
    if (n < 0) return kernel_error("relay: returned bytes", POLLIN);
    if (n == 0) return l.Fail(ECONNRESET);
    const ssize_t w = io.Write(chunk, static_cast<size_t>(n));
    if (w < 0) return kernel_error("relay: echo", POLLOUT);
    if (io.Consume(chunk, static_cast<size_t>(w)) != w) return l.Fail(ECONNRESET);
    sh.move.relay_left -= static_cast<uint64_t>(w);
  }
  if (sh.move.relay_phase == kRelayEcho) sh.move.relay_phase = kRelayUnsent;
  while (sh.move.relay_phase == kRelayUnsent && sh.move.relay_written < sh.staging.fill_len) {
    const ssize_t w = io.Write(l.Slot(sh.staging.fill_slot) + sh.move.relay_written,
                               sh.staging.fill_len - sh.move.relay_written);
    if (w < 0) return kernel_error("relay: unsent bytes", POLLOUT);
    sh.move.relay_written += static_cast<uint32_t>(w);
  }
  if (sh.move.relay_phase == kRelayUnsent) {
    sh.staging.fill_len = 0;
    sh.staging.fill_slot = -1;
    sh.move.relay_phase = kRelayDone;
  }
  sh.move.relay_waits.store(0, std::memory_order_relaxed);
  if (sh.link.close.fin_sent() && !sh.move.relay_shut) {
    io.ShutdownWrite();
    sh.move.relay_shut = true;
  }
  return true;
}

bool Stream::Moved() const { return shared_->move.moved.load(std::memory_order_acquire); }

short Stream::RelayWaitsFor() const {
  return shared_->move.relay_waits.load(std::memory_order_relaxed);
}

}  // namespace san::proto
