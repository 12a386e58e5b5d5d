// The link's per-packet work, inline (private to the stream's implementation): posting a packet,
// reposting a receive, handling what arrived (HandleRecv: every check on what the peer sends),
// reaping completions and sending what the state owes. Every Send and Recv runs through these;
// they were inlined into them when the stream was one file, and out of line (the features are
// separate files now) they cost ~10 % of a small combined send (san-bench, sanlib-combine 4 B).
// Included at the end of locked.h.
#pragma once

#include <poll.h>

#include <atomic>

#include "sanlib/proto/flow_control.h"
#include "sanlib/proto/stream/locked.h"
#include "sanlib/proto/stream/state.h"
#include "sanlib/proto/wire.h"

namespace san::proto {

namespace stream {
constexpr int kPollBatch = 16;  // completions reaped per Poll call
}  // namespace stream

inline Status Stream::Locked::Repost(uint32_t buffer) {
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

inline Status Stream::Locked::ReleaseCredited(uint32_t buffer) {
  sh_.link.account.Released();
  sh_.link.acks.Freed();
  return Repost(buffer);
}

inline Status Stream::Locked::PostPacket(PacketType type, const fabric::Segment* segs, int nsegs,
                                         uint64_t id, bool consumes_credit) {
  fabric::SendWork work;
  work.id = id;
  work.num_segments = static_cast<uint8_t>(nsegs);
  for (int i = 0; i < nsegs; ++i) work.segments[i] = segs[i];
  return PostVia(type, consumes_credit, work,
                 [&](const fabric::SendWork& w) { return s_.endpoint_->PostSend(w); });
}

inline Status Stream::Locked::PostData(const fabric::Segment* segs, int nsegs, uint64_t id,
                                       uint32_t bytes) {
  Status st = PostPacket(PacketType::kData, segs, nsegs, id, true);
  if (st.ok()) {
    sh_.stats.bytes_sent += bytes;
    sh_.link.out_bytes += bytes;
  }
  return st;
}

inline Status Stream::Locked::HandleRecv(const fabric::Completion& c) {
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
      sh_.recv.entries[(sh_.recv.head + sh_.recv.count) % stream::kMaxReceives] =
          stream::RecvEntry{buffer, 0, c.length};
      ++sh_.recv.count;
      sh_.stats.bytes_received += c.length;
      sh_.link.in_bytes += c.length;
      if (c.length >= s_.params_.mtu) {
        sh_.single_copy.big_memory = stream::SingleCopyState::kBigMemory;
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
      sh_.link.peer_source_port = body->source_port;
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

inline void Stream::Locked::Reap() {
  fabric::Completion cq[stream::kPollBatch];
  for (;;) {
    int n = s_.endpoint_->Poll(cq, stream::kPollBatch);
    for (int i = 0; i < n; ++i) {
      const fabric::Completion& c = cq[i];
      if (c.op == fabric::Op::kSend) ++sh_.link.sends_done;
      if (c.op == fabric::Op::kRecv) {
        HandleRecv(c);
      } else if (c.error != 0) {
        if (!MovedOff()) Fail(c.error == EAGAIN ? ECONNRESET : c.error);
      } else if (c.id & stream::kStagingTag) {
        uint64_t slot = c.id & ~stream::kStagingTag;
        if (slot < stream::kStagingSlots) sh_.staging.busy[slot] = 0;
      }
    }
    if (n < stream::kPollBatch) return;
  }
}

inline Status Stream::Locked::SendPending() {
  if (sh_.link.error) return Error();
  if (!sh_.link.wakeup_received) return Status::Ok();
  if (MovedOff()) {
    if (sh_.move.moved_owed &&
        PostPacket(PacketType::kMoved, nullptr, 0, stream::kDirectTag, false).ok()) {
      sh_.move.moved_owed = false;
    }
    return sh_.link.error ? Error() : Status::Ok();
  }
  if (sh_.link.close.finack_owed() && sh_.link.window.has_credit()) {
    Status st = PostPacket(PacketType::kFinAck, nullptr, 0, stream::kDirectTag, true);
    if (st.ok()) sh_.link.close.FinAckSent();
  }
  if (sh_.staging.fill_len > 0 && sh_.link.window.has_credit() &&
      (sh_.link.window.idle() || sh_.link.nodelay || sh_.link.fin_pending ||
       sh_.staging.fill_len >= PacketMax())) {
    FlushCombined();
  }
  if (sh_.link.fin_pending && sh_.staging.fill_len == 0) {
    if (PostPacket(PacketType::kFin, nullptr, 0, stream::kDirectTag, false).ok())
      sh_.link.fin_pending = false;
  }
  if (sh_.link.acks.explicit_ack_due()) {
    if (PostPacket(PacketType::kAck, nullptr, 0, stream::kDirectTag, false).ok()) {
      ++sh_.stats.explicit_acks_sent;
    }
  }
  return sh_.link.error ? Error() : Status::Ok();
}

inline Status Stream::Locked::Progress() {
  Reap();
  return SendPending();
}

}  // namespace san::proto
