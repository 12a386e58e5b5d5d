// The stream's core: the link (sequence numbers, credits, ACKs, WAKEUP, FIN), packet dispatch,
// creation, readiness and statistics. The features live beside it in stream/ (locked.h lists
// them); the interface and its contracts are in stream.h.
#include "sanlib/proto/stream.h"

#include <poll.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <new>

#include "sanlib/proto/flow_control.h"
#include "sanlib/proto/stream/locked.h"
#include "sanlib/proto/stream/state.h"
#include "sanlib/proto/wire.h"

namespace san::proto {

using stream::kDirectTag;
using stream::kMaxReceives;
using stream::kStagingSlots;
using stream::kStagingTag;
using stream::RecvEntry;
using stream::SingleCopyState;

namespace {

constexpr int kPollBatch = 16;

size_t Round64(size_t n) { return (n + 63) & ~size_t{63}; }

}  // namespace

Status Stream::Locked::Repost(uint32_t buffer) {
  fabric::RecvWork work;
  work.id = buffer;
  work.addr = RecvBuffer(buffer);
  work.length = s_.params_.mtu;
  work.key = s_.recv_region_.key;
  Status st = s_.endpoint_->PostRecv(work);
  if (!st.ok()) return Fail(st.code() == EAGAIN ? EPROTO : st.code());
  sh_.recv.posted[buffer] = 1;
  return Status::Ok();
}

Status Stream::Locked::ReleaseCredited(uint32_t buffer) {
  sh_.link.account.Released();
  sh_.link.acks.Freed();
  return Repost(buffer);
}

Status Stream::Locked::PostPacket(PacketType type, const fabric::Segment* segs, int nsegs,
                                  uint64_t id, bool consumes_credit) {
  fabric::SendWork work;
  work.id = id;
  work.num_segments = static_cast<uint8_t>(nsegs);
  for (int i = 0; i < nsegs; ++i) work.segments[i] = segs[i];
  return PostVia(type, consumes_credit, work,
                 [&](const fabric::SendWork& w) { return s_.endpoint_->PostSend(w); });
}

Status Stream::Locked::PostData(const fabric::Segment* segs, int nsegs, uint64_t id,
                                uint32_t bytes) {
  Status st = PostPacket(PacketType::kData, segs, nsegs, id, true);
  if (st.ok()) {
    sh_.stats.bytes_sent += bytes;
    sh_.link.out_bytes += bytes;
  }
  return st;
}

Status Stream::Locked::HandleRecv(const fabric::Completion& c) {
  // Nothing behind a protocol violation is accepted (packets that landed after the violating
  // one, reaped in the same batch). Other failures do not stop this: after a break the provider
  // still reports the messages that had fully landed, e.g. a peer's whole stream and its FIN.
  if (sh_.link.violated) return Error();
  // Once MOVE went, the mover's endpoint may go away at any time (its exec closes it): the
  // flushed receives say nothing about the connection, which goes on over TCP.
  if (c.error != 0) return MovedOff() ? Status::Ok() : Fail(ECONNRESET);
  // Nothing follows the peer's MOVE or its MOVED.
  if (sh_.move.peer_moved || sh_.move.acked) return Violation();
  if (c.id >= depth() || !sh_.recv.posted[c.id]) return Violation();
  const uint32_t buffer = static_cast<uint32_t>(c.id);
  sh_.recv.posted[buffer] = 0;
  if (c.length > s_.params_.mtu) return Violation();
  Result<Header> h = DecodeImm(c.imm);
  if (!h.ok()) return Violation();
  if (h->seq != sh_.link.recv_seq) return Violation();  // lost or reordered packet
  ++sh_.link.recv_seq;
  ++sh_.stats.packets_received;
  if (h->type != PacketType::kWakeup && !sh_.link.wakeup_received) return Violation();
  // A WAKEUP's credits are granted after it opened the window: the peer may already have freed
  // our WAKEUP's buffer, and Open() would otherwise overwrite that credit.
  if (h->type != PacketType::kWakeup && !sh_.link.window.Grant(h->credits).ok()) return Violation();
  switch (h->type) {
    case PacketType::kData:
      if (c.length == 0 || sh_.link.close.peer_fin()) return Violation();
      if (!sh_.link.account.Arrived().ok()) return Violation();
      sh_.recv.entries[(sh_.recv.head + sh_.recv.count) % kMaxReceives] =
          RecvEntry{buffer, 0, c.length};
      ++sh_.recv.count;
      sh_.stats.bytes_received += c.length;
      sh_.link.in_bytes += c.length;
      if (c.length >= s_.params_.mtu) {
        sh_.single_copy.big_memory = SingleCopyState::kBigMemory;
      } else if (sh_.single_copy.big_memory > 0) {
        --sh_.single_copy.big_memory;
      }
      return Status::Ok();
    case PacketType::kAck:
      if (c.length != 0) return Violation();
      return Repost(buffer);
    case PacketType::kWakeup: {
      if (sh_.link.wakeup_received) return Violation();
      Result<WakeupBody> body = DecodeWakeup(RecvBuffer(buffer), c.length);
      if (!body.ok()) return Violation();
      if (!sh_.link.account.Arrived().ok()) return Violation();
      if (!sh_.link.window.Open(body->window, sh_.link.wakeup_sent ? 1 : 0).ok())
        return Violation();
      if (!sh_.link.window.Grant(h->credits).ok()) return Violation();
      sh_.link.peer_buffer_size = body->buffer_size;
      sh_.single_copy.peer_can_write = (body->flags & kWakeupCanWrite) != 0;
      sh_.link.peer_from_tcp = (body->flags & kWakeupFromTcp) != 0;
      sh_.link.peer_tcp_bytes = body->tcp_bytes;
      sh_.link.acks.set_threshold(
          EffectiveAckThreshold(s_.params_.ack_threshold, s_.params_.window, body->ack_reserve));
      sh_.link.wakeup_received = true;
      return ReleaseCredited(buffer);
    }
    case PacketType::kFin:
      if (c.length != 0 || !sh_.link.close.PeerFin().ok()) return Violation();
      return Repost(buffer);
    case PacketType::kFinAck:
      if (c.length != 0 || !sh_.link.account.Arrived().ok()) return Violation();
      if (!sh_.link.close.PeerFinAck().ok()) return Violation();
      return ReleaseCredited(buffer);
    case PacketType::kAdvert:
      return OnAdvert(buffer, c.length);
    case PacketType::kPut:
      return OnPut(buffer, c.length);
    case PacketType::kMove:
      return OnMove(buffer, c.length);
    case PacketType::kMoved:
      return OnMoved(buffer, c.length);
  }
  return Violation();
}

void Stream::Locked::Reap() {
  fabric::Completion cq[kPollBatch];
  for (;;) {
    int n = s_.endpoint_->Poll(cq, kPollBatch);
    for (int i = 0; i < n; ++i) {
      const fabric::Completion& c = cq[i];
      if (c.op == fabric::Op::kSend) ++sh_.link.sends_done;
      if (c.op == fabric::Op::kRecv) {
        HandleRecv(c);
      } else if (c.error != 0) {
        if (!MovedOff()) Fail(c.error == EAGAIN ? ECONNRESET : c.error);
      } else if (c.id & kStagingTag) {
        uint64_t slot = c.id & ~kStagingTag;
        if (slot < kStagingSlots) sh_.staging.busy[slot] = 0;
      }
    }
    if (n < kPollBatch) return;
  }
}

Status Stream::Locked::SendPending() {
  if (sh_.link.error) return Error();
  if (!sh_.link.wakeup_received) return Status::Ok();
  if (MovedOff()) {
    if (sh_.move.moved_owed && PostPacket(PacketType::kMoved, nullptr, 0, kDirectTag, false).ok()) {
      sh_.move.moved_owed = false;
    }
    return sh_.link.error ? Error() : Status::Ok();
  }
  if (sh_.link.close.finack_owed() && sh_.link.window.has_credit()) {
    Status st = PostPacket(PacketType::kFinAck, nullptr, 0, kDirectTag, true);
    if (st.ok()) sh_.link.close.FinAckSent();
  }
  if (sh_.staging.fill_len > 0 && sh_.link.window.has_credit() &&
      (sh_.link.window.idle() || sh_.link.nodelay || sh_.link.fin_pending ||
       sh_.staging.fill_len >= PacketMax())) {
    FlushCombined();
  }
  if (sh_.link.fin_pending && sh_.staging.fill_len == 0) {
    if (PostPacket(PacketType::kFin, nullptr, 0, kDirectTag, false).ok())
      sh_.link.fin_pending = false;
  }
  if (sh_.link.acks.explicit_ack_due()) {
    if (PostPacket(PacketType::kAck, nullptr, 0, kDirectTag, false).ok()) {
      ++sh_.stats.explicit_acks_sent;
    }
  }
  return sh_.link.error ? Error() : Status::Ok();
}

Status Stream::Locked::Progress() {
  Reap();
  return SendPending();
}

Stream::Stream(std::unique_ptr<fabric::Endpoint> endpoint, uint32_t caps,
               const StreamParams& params)
    : endpoint_(std::move(endpoint)), caps_(caps), params_(params) {}

Stream::~Stream() {
  if (shared_) munmap(shared_, sizeof(StreamShared));
}

fabric::EndpointAttr Stream::EndpointAttrFor(const StreamParams& params) {
  fabric::EndpointAttr attr;
  attr.recv_depth = params.receive_depth();
  attr.send_depth = params.receive_depth() + kStagingSlots + 8;
  attr.buffer_bytes = Round64(sizeof(StreamShared)) + 64 +
                      size_t{params.receive_depth() + kStagingSlots} * params.mtu + 4096;
  return attr;
}

Result<std::unique_ptr<Stream>> Stream::Create(std::unique_ptr<fabric::Endpoint> endpoint,
                                               uint32_t provider_caps, const StreamParams& params) {
  if (params.ack_threshold == 0 || params.ack_threshold >= params.window || params.window > 255 ||
      params.receive_depth() > kMaxReceives || params.mtu < 64 || params.mtu > endpoint->mtu()) {
    return Status(EINVAL, "stream parameters");
  }
  std::unique_ptr<Stream> s(new Stream(std::move(endpoint), provider_caps, params));
  // The state block must not be in the endpoint's buffers: the peer can write those at any time
  // (a scribbled lock, rq_head or fill_slot meant a hang or a wild read/write). An anonymous
  // MAP_SHARED mapping is ours alone and still shared with a fork child, like fabric/shm's
  // LocalState (DESIGN.md "Security and bad input").
  void* state = mmap(nullptr, sizeof(StreamShared), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (state == MAP_FAILED) return Status::FromErrno("mmap(stream state)");
  s->shared_ = new (state) StreamShared();
  Result<fabric::MemoryRegion> recv =
      s->endpoint_->AllocateBuffer(size_t{params.receive_depth()} * params.mtu);
  if (!recv.ok()) return recv.status();
  s->recv_region_ = recv.value();
  Result<fabric::MemoryRegion> staging =
      s->endpoint_->AllocateBuffer(size_t{kStagingSlots} * params.mtu);
  if (!staging.ok()) return staging.status();
  s->staging_region_ = staging.value();
  Locked l(*s);
  l.sh().link.acks.set_threshold(params.ack_threshold);
  l.sh().link.account.set_window(params.window);
  l.sh().link.nodelay = !params.combine.enabled;
  for (uint32_t i = 0; i < params.receive_depth(); ++i) {
    Status st = l.Repost(i);
    if (!st.ok()) return st;
  }
  return s;
}

Status Stream::Start() { return Start(std::nullopt); }

Status Stream::Start(std::optional<uint64_t> tcp_bytes) {
  Locked l(*this);
  StreamShared& sh = l.sh();
  if (sh.link.wakeup_sent) return Status::Ok();
  if (sh.link.error) return l.Error();
  WakeupBody body;
  body.window = static_cast<uint16_t>(params_.window);
  body.ack_reserve = static_cast<uint16_t>(params_.window / params_.ack_threshold + 1);
  body.buffer_size = params_.mtu;
  // Single copy: can we write into the peer's process? (The provider probes once.)
  sh.single_copy.can_write = (caps_ & fabric::kCapSingleCopy) &&
                             (caps_ & fabric::kCapSendFromAnyMemory) &&
                             endpoint_->CanWriteWindows();
  if (sh.single_copy.can_write) body.flags |= kWakeupCanWrite;
  if (tcp_bytes) {
    body.flags |= kWakeupFromTcp;
    body.tcp_bytes = *tcp_bytes;
  }
  int slot = l.FreeSlot();
  if (slot < 0) return Status(EAGAIN, "staging");
  EncodeWakeup(body, l.Slot(slot));
  fabric::Segment seg{l.Slot(slot), static_cast<uint32_t>(body.size()), staging_region_.key};
  Status st = l.PostPacket(PacketType::kWakeup, &seg, 1, kStagingTag | slot, true);
  if (!st.ok()) return st;
  sh.staging.busy[slot] = 1;
  sh.link.wakeup_sent = true;
  return Status::Ok();
}

std::optional<uint64_t> Stream::PeerTcpBytes() {
  Locked l(*this);
  l.Progress();
  if (!l.sh().link.peer_from_tcp) return std::nullopt;
  return l.sh().link.peer_tcp_bytes;
}

Status Stream::ShutdownWrite() {
  Locked l(*this);
  if (l.sh().link.close.ShutdownWrite()) l.sh().link.fin_pending = true;
  return l.Progress();
}

Status Stream::Progress() {
  Locked l(*this);
  return l.Progress();
}

Readiness Stream::GetReadiness() {
  Locked l(*this);
  l.Progress();
  const StreamShared& sh = l.sh();
  Readiness r;
  r.error = sh.link.error;
  r.peer_closed = sh.link.close.peer_fin();
  r.write_closed = sh.link.close.fin_sent();
  r.readable = sh.recv.count > 0 || r.peer_closed || r.error ||
               (sh.single_copy.win_open && sh.single_copy.win_put);
  r.moved = l.MovedOff();
  r.writable = !r.write_closed && sh.link.wakeup_received && !r.moved &&
               (sh.link.window.has_credit() ||
                (sh.staging.fill_len > 0 && sh.staging.fill_len < l.PacketMax()));
  return r;
}

bool Stream::Finished() {
  Locked l(*this);
  l.Progress();
  const StreamShared& sh = l.sh();
  // Our FIN is acknowledged (so everything before it arrived) and we owe nothing: the peer's own
  // FIN is not waited for, as a kernel socket in FIN_WAIT_2 holds no application state either.
  return sh.link.close.fin_sent() && sh.link.close.fin_acked() && !sh.link.close.finack_owed() &&
         !sh.link.fin_pending && sh.staging.fill_len == 0;
}

bool Stream::NothingLeftToPost() {
  Locked l(*this);
  l.Progress();
  return !l.sh().link.fin_pending || l.sh().link.error != 0 || endpoint_->broken() || l.MovedOff();
}

void Stream::Abort() {
  Locked l(*this);
  l.Fail(ECONNRESET);
}

void Stream::Fail(int error) {
  Locked l(*this);
  l.Fail(error);
}

void Stream::AddUser() { shared_->users.fetch_add(1, std::memory_order_acq_rel); }

bool Stream::DropUser() { return shared_->users.fetch_sub(1, std::memory_order_acq_rel) == 1; }

void Stream::SetNoDelay(bool nodelay) {
  Locked l(*this);
  l.sh().link.nodelay = nodelay || !params_.combine.enabled;
  if (l.sh().link.nodelay) l.Progress();  // setting TCP_NODELAY pushes what is buffered
}

bool Stream::nodelay() {
  Locked l(*this);
  return l.sh().link.nodelay;
}

StreamStats Stream::Stats() {
  Locked l(*this);
  StreamStats s = l.sh().stats;
  s.credits = l.sh().link.window.credits();
  s.window = l.sh().link.window.window();
  s.mtu = l.sh().link.peer_buffer_size ? l.PacketMax() : params_.mtu;
  s.phase = l.sh().link.close.phase();
  s.single_copy_out = l.sh().single_copy.can_write;
  s.single_copy_in = l.sh().single_copy.peer_can_write && endpoint_->CanExposeWindows();
  return s;
}

}  // namespace san::proto
