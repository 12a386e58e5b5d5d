#include "sanlib/proto/stream.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <new>

#include "sanlib/common/clock.h"
#include "sanlib/common/spin_lock.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/proto/flow_control.h"
#include "sanlib/proto/wire.h"

namespace san::proto {
namespace {

constexpr uint32_t kStagingSlots = 4;
constexpr uint32_t kMaxReceives = 512;  // P <= 255 + 255 + 2
constexpr uint64_t kStagingTag = 1ull << 63;
constexpr uint64_t kDirectTag = 1ull << 62;
// PostVia's "the file gave nothing, so nothing was posted" (no endpoint call returns it).
constexpr int kNothingPosted = ENODATA;
constexpr int kPollBatch = 16;
// Single copy: the largest window we expose and the most one write moves (a revoker may have to
// wait for one write: keep it to a few milliseconds).
constexpr uint32_t kMaxWindowBytes = 16u << 20;
// How long a receiver whose window was written waits for the writer's PUT (posted right after
// the write by a correct peer).
constexpr uint64_t kPutWaitNs = 1'000'000'000;
constexpr uint32_t kBigMemory = 8;
// The relay (peer of a mover), in order: read the MoveHeader, echo the returned bytes, write our
// unposted combined bytes; then done.
enum RelayPhase : uint8_t { kRelayHeader = 0, kRelayEcho = 1, kRelayUnsent = 2, kRelayDone = 3 };
constexpr size_t kRelayChunk = 16384;

struct RecvEntry {
  uint32_t buffer;
  uint32_t offset;
  uint32_t length;
};

size_t Round64(size_t n) { return (n + 63) & ~size_t{63}; }

size_t IovLength(const iovec* iov, int iovcnt) {
  size_t total = 0;
  for (int i = 0; i < iovcnt; ++i) total += iov[i].iov_len;
  return total;
}

// Walks an iovec array, handing out contiguous pieces.
class IovCursor {
 public:
  IovCursor(const iovec* iov, int iovcnt) : iov_(iov), count_(iovcnt) { Skip(); }
  bool done() const { return index_ >= count_; }
  // The next contiguous piece of at most `max` bytes.
  iovec Take(size_t max) {
    iovec piece{static_cast<char*>(iov_[index_].iov_base) + offset_,
                std::min(max, iov_[index_].iov_len - offset_)};
    offset_ += piece.iov_len;
    Skip();
    return piece;
  }

 private:
  void Skip() {
    while (index_ < count_ && offset_ == iov_[index_].iov_len) {
      ++index_;
      offset_ = 0;
    }
  }
  const iovec* iov_;
  int count_;
  int index_ = 0;
  size_t offset_ = 0;
};

}  // namespace

// The state block in shared memory. Plain data plus a process-shared lock.
struct StreamShared {
  SpinLock lock;
  SendWindow window;
  DelayedAck acks;
  ReceiveAccount account;
  CloseState close;
  uint16_t send_seq = 0;
  uint16_t recv_seq = 0;
  bool wakeup_sent = false;
  bool wakeup_received = false;
  // The peer's WAKEUP said its connection began on kernel TCP: how many bytes it wrote there.
  bool peer_from_tcp = false;
  uint64_t peer_tcp_bytes = 0;
  bool fin_pending = false;  // FIN requested, waiting for the combine buffer to drain
  bool nodelay = false;
  int error = 0;
  bool violated = false;  // the peer broke the protocol: nothing it sent after that is accepted
  // Every PostSend yields exactly one completion, in order: a zero-copy Send waits until
  // sends_done reaches the count its last packet made.
  uint64_t sends_posted = 0;
  uint64_t sends_done = 0;
  bool zero_copy_off = false;  // a registration was refused: copy from now on
  std::atomic<uint32_t> users{1};
  uint32_t peer_buffer_size = 0;

  // Single copy (docs/protocol.md "Single copy").
  bool can_write = false;       // we may write into the peer's windows (provider probe said yes)
  bool peer_can_write = false;  // the peer may write into ours (its WAKEUP flag, until a PUT 0)
  uint64_t out_bytes = 0;       // stream bytes we sent (DATA and PUT)
  uint64_t in_bytes = 0;        // stream bytes we received (DATA and PUT)
  // Does the peer send big messages? Set to kBigMemory by a full-size DATA packet or a PUT, one
  // less per smaller DATA packet (a big message's short tail does not reset it; a run of small
  // messages does).
  uint32_t big_memory = 0;
  bool adv_valid = false;  // sending side: the peer's latest ADVERT, not used yet
  AdvertBody adv;
  bool win_open = false;  // receiving side: our window (offered by win_pid over win_addr)
  bool win_put = false;   // its PUT arrived (win_put_len bytes are in the buffer)
  int32_t win_pid = 0;
  uint32_t win_generation = 0;
  uint32_t win_len = 0;
  uint32_t win_put_len = 0;
  uint64_t win_addr = 0;
  uint64_t win_offset = 0;  // in_bytes when it was offered

  // Moving to TCP (stream.h).
  std::atomic<bool> moved{false};  // any of the below: Stream::Moved() without the lock
  bool move_sent = false;          // mover: MOVE posted
  bool move_acked = false;         // mover: the peer's MOVED arrived
  bool handed_over = false;        // mover: TakeForTcp ran (the kernel socket carries it all)
  bool peer_moved = false;         // peer: MOVE arrived
  bool moved_owed = false;         // peer: MOVED still to post
  uint8_t relay_phase = kRelayHeader;
  bool relay_shut = false;            // the kernel socket was shut for writing
  uint64_t relay_left = 0;            // returned bytes still to echo
  uint32_t relay_written = 0;         // of our combined bytes, written to the kernel socket
  std::atomic<short> relay_waits{0};  // POLLIN/POLLOUT the relay waits for on the kernel socket

  uint32_t rq_head = 0;
  uint32_t rq_count = 0;
  // Borrow (stream.h): the first lent_length queued bytes, from rq[rq_head] (in buffer
  // lent_buffer) on, are out on loan; no Recv or Borrow takes bytes until GiveBack.
  bool lent = false;
  uint32_t lent_buffer = 0;
  uint32_t lent_length = 0;
  RecvEntry rq[kMaxReceives];
  uint8_t posted[kMaxReceives];

  uint8_t slot_busy[kStagingSlots];
  int32_t fill_slot = -1;
  uint32_t fill_len = 0;
  uint64_t fill_since_ns = 0;

  StreamStats stats;
};

class Stream::Locked {
 public:
  explicit Locked(Stream& s) : s_(s), sh_(*s.shared_) { sh_.lock.lock(); }
  // Takes over a lock the caller already acquired (try_lock).
  Locked(Stream& s, std::adopt_lock_t) : s_(s), sh_(*s.shared_) {}
  ~Locked() { sh_.lock.unlock(); }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

  StreamShared& sh() { return sh_; }

  Status Fail(int error) {
    if (sh_.error == 0) {
      sh_.error = error;
      s_.endpoint_->Disconnect();
    }
    return Status(sh_.error, "san stream");
  }
  Status Error() const { return Status(sh_.error, "san stream"); }
  // The peer broke the protocol (EPROTO, unless the connection had already failed otherwise).
  Status Violation() {
    sh_.violated = true;
    return Fail(EPROTO);
  }

  std::byte* RecvBuffer(uint32_t i) const {
    return s_.recv_region_.addr + size_t{i} * s_.params_.mtu;
  }
  std::byte* Slot(uint32_t i) const { return s_.staging_region_.addr + size_t{i} * s_.params_.mtu; }
  uint32_t depth() const { return s_.params_.receive_depth(); }

  // Largest DATA payload we may send: the peer's buffer size, our staging size, the provider's MTU.
  uint32_t PacketMax() const {
    return std::min({sh_.peer_buffer_size, s_.params_.mtu, s_.endpoint_->mtu()});
  }
  CombinePolicy Policy() const {
    CombinePolicy p = s_.params_.combine;
    p.enabled = p.enabled && !sh_.nodelay;
    p.mtu = PacketMax();
    return p;
  }

  Status Repost(uint32_t buffer) {
    fabric::RecvWork work;
    work.id = buffer;
    work.addr = RecvBuffer(buffer);
    work.length = s_.params_.mtu;
    work.key = s_.recv_region_.key;
    Status st = s_.endpoint_->PostRecv(work);
    if (!st.ok()) return Fail(st.code() == EAGAIN ? EPROTO : st.code());
    sh_.posted[buffer] = 1;
    return Status::Ok();
  }

  // A buffer whose packet used one of the window's credits is free again: report it to the peer.
  Status ReleaseCredited(uint32_t buffer) {
    sh_.account.Released();
    sh_.acks.Freed();
    return Repost(buffer);
  }

  Status PostPacket(PacketType type, const fabric::Segment* segs, int nsegs, uint64_t id,
                    bool consumes_credit) {
    fabric::SendWork work;
    work.id = id;
    work.num_segments = static_cast<uint8_t>(nsegs);
    for (int i = 0; i < nsegs; ++i) work.segments[i] = segs[i];
    return PostVia(type, consumes_credit, work,
                   [&](const fabric::SendWork& w) { return s_.endpoint_->PostSend(w); });
  }

  // Puts the header on `work` and posts it with `post` (the endpoint call), retrying while the
  // send queue is full. `post` may return kNothingPosted: not sent, not an error.
  template <typename PostFn>
  Status PostVia(PacketType type, bool consumes_credit, fabric::SendWork& work, PostFn post) {
    if (consumes_credit && !sh_.window.has_credit()) return Status(EAGAIN, "window");
    Header h;
    h.type = type;
    h.seq = sh_.send_seq;
    h.credits = sh_.acks.Take();
    work.imm = EncodeImm(h);
    Status st = post(work);
    for (int attempt = 0; st.would_block() && attempt < 3; ++attempt) {
      Reap();  // send completions free send-queue entries
      st = post(work);
    }
    if (!st.ok()) {
      for (uint32_t i = 0; i < h.credits; ++i) sh_.acks.Freed();  // not reported after all
      if (st.would_block() || st.code() == kNothingPosted) return st;
      return Fail(st.code());
    }
    ++sh_.send_seq;
    ++sh_.sends_posted;
    ++sh_.stats.packets_sent;
    if (consumes_credit) sh_.window.Consume();
    return Status::Ok();
  }

  Status PostData(const fabric::Segment* segs, int nsegs, uint64_t id, uint32_t bytes) {
    Status st = PostPacket(PacketType::kData, segs, nsegs, id, true);
    if (st.ok()) {
      sh_.stats.bytes_sent += bytes;
      sh_.out_bytes += bytes;
    }
    return st;
  }

  // ---- Single copy (docs/protocol.md "Single copy") ----

  // Small bodies (ADVERT, PUT) go from the stack: single copy requires kCapSendFromAnyMemory.
  Status PostPut(uint32_t generation, uint32_t length) {
    PutBody body;
    body.generation = generation;
    body.length = length;
    std::byte bytes[PutBody::kSize];
    EncodePut(body, bytes);
    fabric::Segment seg{bytes, PutBody::kSize, 0};
    return PostPacket(PacketType::kPut, &seg, 1, kDirectTag, true);
  }

  bool SingleCopyProvider() const {
    return (s_.caps_ & fabric::kCapSingleCopy) && (s_.caps_ & fabric::kCapSendFromAnyMemory);
  }

  bool OwnsWindow(const void* buffer) const {
    return sh_.win_open && sh_.win_addr == reinterpret_cast<uintptr_t>(buffer) &&
           sh_.win_pid == ThisPid();
  }

  // Receiving side: with nothing queued, expose `buf` and advertise it. False: not now (the
  // caller just waits for packets as usual).
  bool TryOffer(const iovec& buf, size_t offer_min) {
    if (!SingleCopyProvider() || !sh_.peer_can_write || !sh_.wakeup_received || sh_.win_open ||
        MovedOff() || sh_.error || sh_.close.peer_fin() || sh_.close.fin_sent() ||
        sh_.rq_count != 0 || !sh_.window.has_credit() || buf.iov_len < offer_min) {
      return false;
    }
    // Only when the peer has been sending big messages: an ADVERT per small message would cost
    // a packet each way for nothing.
    if (sh_.big_memory == 0) return false;
    if (!s_.endpoint_->CanExposeWindows()) return false;
    const uint32_t len = static_cast<uint32_t>(std::min<size_t>(buf.iov_len, kMaxWindowBytes));
    Result<fabric::WindowKey> key = s_.endpoint_->ExposeWindow(buf.iov_base, len);
    if (!key.ok()) return false;
    AdvertBody body;
    body.generation = key->generation;
    body.stream_offset = sh_.in_bytes;
    body.addr = key->addr;
    body.length = len;
    std::byte bytes[AdvertBody::kSize];
    EncodeAdvert(body, bytes);
    fabric::Segment seg{bytes, AdvertBody::kSize, 0};
    if (!PostPacket(PacketType::kAdvert, &seg, 1, kDirectTag, true).ok()) {
      s_.endpoint_->RevokeWindow();  // nobody has the key: unused
      return false;
    }
    sh_.win_open = true;
    sh_.win_put = false;
    sh_.win_pid = ThisPid();
    sh_.win_generation = key->generation;
    sh_.win_len = len;
    sh_.win_put_len = 0;
    sh_.win_addr = key->addr;
    sh_.win_offset = sh_.in_bytes;
    ++sh_.stats.windows_offered;
    return true;
  }

  // Receiving side: ends our open window. After the provider's revoke nothing lands in it; if the
  // peer wrote, its PUT follows the write at once, and we wait (bounded) for it to learn how much.
  Result<size_t> CloseWindow() {
    Result<fabric::WindowFate> fate = s_.endpoint_->RevokeWindow();
    if (!fate.ok()) {
      sh_.win_open = sh_.win_put = false;
      return Fail(ECONNRESET);
    }
    if (fate.value() == fabric::WindowFate::kWritten && !sh_.win_put) {
      const uint64_t deadline = NowNs() + kPutWaitNs;
      while (!sh_.win_put && !sh_.error) {
        Reap();
        if (sh_.win_put || sh_.error) break;
        if (NowNs() > deadline) {
          Fail(ECONNRESET);
          break;
        }
        CpuRelax();
      }
    }
    const bool put = sh_.win_put;
    const uint32_t n = put ? sh_.win_put_len : 0;
    sh_.win_open = sh_.win_put = false;
    // A PUT that claims bytes nobody wrote (the window was never claimed) is a lie.
    if (fate.value() == fabric::WindowFate::kUnused && n > 0) return Violation();
    if (n > 0) {
      ++sh_.stats.windows_filled;
      return size_t{n};
    }
    if (sh_.error) return Error();
    return size_t{0};
  }

  // Sending side: writes the start of `iov` straight into the peer's advertised window, if there
  // is one we may use now. Returns bytes sent that way (0: use the ring), or a connection error.
  Result<size_t> SendToWindow(const iovec* iov, int iovcnt, size_t total) {
    if (!sh_.adv_valid || !sh_.can_write || !sh_.window.has_credit()) return size_t{0};
    sh_.adv_valid = false;  // a window is written at most once, whatever happens now
    // Our stream must be exactly where the peer's receive stands: nothing in flight, nothing
    // buffered. Otherwise the window would receive bytes out of order: leave it (the peer
    // revokes it when our packets arrive).
    if (sh_.adv.stream_offset != sh_.out_bytes || sh_.fill_len != 0) return size_t{0};
    const size_t want = std::min<size_t>({total, sh_.adv.length, kMaxWindowBytes});
    fabric::Segment segs[fabric::kMaxWindowSegments];
    int nsegs = 0;
    size_t bytes = 0;
    IovCursor cursor(iov, iovcnt);
    while (bytes < want && nsegs < fabric::kMaxWindowSegments && !cursor.done()) {
      iovec piece = cursor.Take(want - bytes);
      segs[nsegs++] = fabric::Segment{piece.iov_base, static_cast<uint32_t>(piece.iov_len), 0};
      bytes += piece.iov_len;
    }
    fabric::WindowKey key;
    key.addr = sh_.adv.addr;
    key.length = sh_.adv.length;
    key.generation = sh_.adv.generation;
    Result<size_t> w = s_.endpoint_->WriteWindow(key, segs, nsegs);
    if (!w.ok()) {
      if (w.status().code() == ECANCELED) return size_t{0};  // revoked first: nothing written
      // Refused (EPERM/ENOSYS: a seccomp filter, Yama, a non-dumpable peer...) or failed: no
      // single copy on this connection any more, and the peer must stop waiting on its window.
      sh_.can_write = false;
      Status st = PostPut(key.generation, 0);
      if (!st.ok()) return st.would_block() ? Fail(ECONNRESET) : st;
      return size_t{0};
    }
    // The bytes are in the peer's buffer; it learns how many from the PUT. Without it the two
    // streams would disagree, so a PUT that cannot go fails the connection.
    Status st = PostPut(key.generation, static_cast<uint32_t>(w.value()));
    if (!st.ok()) return Fail(st.would_block() ? ECONNRESET : st.code());
    sh_.out_bytes += w.value();
    sh_.stats.bytes_sent += w.value();
    sh_.stats.single_copy_bytes_sent += w.value();
    return w.value();
  }

  int FreeSlot() const {
    for (uint32_t i = 0; i < kStagingSlots; ++i) {
      if (!sh_.slot_busy[i] && static_cast<int32_t>(i) != sh_.fill_slot) return static_cast<int>(i);
    }
    return -1;
  }

  Status FlushCombined() {
    if (sh_.fill_len == 0 || MovedOff()) return Status::Ok();  // moved: the relay writes them
    fabric::Segment seg{Slot(sh_.fill_slot), sh_.fill_len, s_.staging_region_.key};
    Status st = PostData(&seg, 1, kStagingTag | static_cast<uint64_t>(sh_.fill_slot), sh_.fill_len);
    if (!st.ok()) return st;
    sh_.slot_busy[sh_.fill_slot] = 1;
    sh_.fill_slot = -1;
    sh_.fill_len = 0;
    return Status::Ok();
  }

  // Handles one received packet. Everything the peer controls is checked here.
  Status HandleRecv(const fabric::Completion& c) {
    // Nothing behind a protocol violation is accepted (packets that landed after the violating
    // one, reaped in the same batch). Other failures do not stop this: after a break the provider
    // still reports the messages that had fully landed, e.g. a peer's whole stream and its FIN.
    if (sh_.violated) return Error();
    // Once MOVE went, the mover's endpoint may go away at any time (its exec closes it): the
    // flushed receives say nothing about the connection, which goes on over TCP.
    if (c.error != 0) return MovedOff() ? Status::Ok() : Fail(ECONNRESET);
    // Nothing follows the peer's MOVE or its MOVED.
    if (sh_.peer_moved || sh_.move_acked) return Violation();
    if (c.id >= depth() || !sh_.posted[c.id]) return Violation();
    const uint32_t buffer = static_cast<uint32_t>(c.id);
    sh_.posted[buffer] = 0;
    if (c.length > s_.params_.mtu) return Violation();
    Result<Header> h = DecodeImm(c.imm);
    if (!h.ok()) return Violation();
    if (h->seq != sh_.recv_seq) return Violation();  // lost or reordered packet
    ++sh_.recv_seq;
    ++sh_.stats.packets_received;
    if (h->type != PacketType::kWakeup && !sh_.wakeup_received) return Violation();
    // A WAKEUP's credits are granted after it opened the window: the peer may already have freed
    // our WAKEUP's buffer, and Open() would otherwise overwrite that credit.
    if (h->type != PacketType::kWakeup && !sh_.window.Grant(h->credits).ok()) return Violation();
    switch (h->type) {
      case PacketType::kData:
        if (c.length == 0 || sh_.close.peer_fin()) return Violation();
        if (!sh_.account.Arrived().ok()) return Violation();
        sh_.rq[(sh_.rq_head + sh_.rq_count) % kMaxReceives] = RecvEntry{buffer, 0, c.length};
        ++sh_.rq_count;
        sh_.stats.bytes_received += c.length;
        sh_.in_bytes += c.length;
        if (c.length >= s_.params_.mtu) {
          sh_.big_memory = kBigMemory;
        } else if (sh_.big_memory > 0) {
          --sh_.big_memory;
        }
        return Status::Ok();
      case PacketType::kAck:
        if (c.length != 0) return Violation();
        return Repost(buffer);
      case PacketType::kWakeup: {
        if (sh_.wakeup_received) return Violation();
        Result<WakeupBody> body = DecodeWakeup(RecvBuffer(buffer), c.length);
        if (!body.ok()) return Violation();
        if (!sh_.account.Arrived().ok()) return Violation();
        if (!sh_.window.Open(body->window, sh_.wakeup_sent ? 1 : 0).ok()) return Violation();
        if (!sh_.window.Grant(h->credits).ok()) return Violation();
        sh_.peer_buffer_size = body->buffer_size;
        sh_.peer_can_write = (body->flags & kWakeupCanWrite) != 0;
        sh_.peer_from_tcp = (body->flags & kWakeupFromTcp) != 0;
        sh_.peer_tcp_bytes = body->tcp_bytes;
        sh_.acks.set_threshold(
            EffectiveAckThreshold(s_.params_.ack_threshold, s_.params_.window, body->ack_reserve));
        sh_.wakeup_received = true;
        return ReleaseCredited(buffer);
      }
      case PacketType::kFin:
        if (c.length != 0 || !sh_.close.PeerFin().ok()) return Violation();
        return Repost(buffer);
      case PacketType::kFinAck:
        if (c.length != 0 || !sh_.account.Arrived().ok()) return Violation();
        if (!sh_.close.PeerFinAck().ok()) return Violation();
        return ReleaseCredited(buffer);
      case PacketType::kAdvert: {
        Result<AdvertBody> body = DecodeAdvert(RecvBuffer(buffer), c.length);
        if (!body.ok() || !sh_.account.Arrived().ok()) return Violation();
        // Kept only if we can use it; addr and length are the peer's claims about its own memory
        // (the provider writes only into the process it validated, at most `length` bytes).
        if (sh_.can_write) {
          sh_.adv = body.value();
          sh_.adv_valid = true;
        }
        return ReleaseCredited(buffer);
      }
      case PacketType::kPut: {
        Result<PutBody> body = DecodePut(RecvBuffer(buffer), c.length);
        if (!body.ok() || !sh_.account.Arrived().ok()) return Violation();
        if (body->length == 0) {  // declined: the peer cannot write into our windows
          sh_.peer_can_write = false;
          if (sh_.win_open && !sh_.win_put && body->generation == sh_.win_generation) {
            sh_.win_put = true;
            sh_.win_put_len = 0;
          }
          return ReleaseCredited(buffer);
        }
        // Bytes in our window: the open one, with nothing of the stream between its ADVERT and
        // this PUT, and no more than it holds.
        if (!sh_.win_open || sh_.win_put || body->generation != sh_.win_generation ||
            body->length > sh_.win_len || sh_.in_bytes != sh_.win_offset || sh_.close.peer_fin()) {
          return Violation();
        }
        sh_.win_put = true;
        sh_.win_put_len = body->length;
        sh_.in_bytes += body->length;
        sh_.big_memory = kBigMemory;
        sh_.stats.bytes_received += body->length;
        sh_.stats.single_copy_bytes_received += body->length;
        return ReleaseCredited(buffer);
      }
      case PacketType::kMove:
        if (c.length != 0) return Violation();
        if (sh_.move_sent) {  // both sides moving at once: neither can
          Repost(buffer);
          return Fail(ECONNRESET);
        }
        sh_.peer_moved = true;
        sh_.moved_owed = true;
        sh_.relay_waits.store(POLLIN, std::memory_order_relaxed);  // for the header
        sh_.adv_valid = false;
        sh_.moved.store(true, std::memory_order_release);
        return Repost(buffer);
      case PacketType::kMoved:
        if (c.length != 0 || !sh_.move_sent) return Violation();
        sh_.move_acked = true;
        return Repost(buffer);
    }
    return Violation();
  }

  // Reaps every completion that is there and updates state; sends nothing itself except reposted
  // receives (so it can be called from inside PostPacket).
  void Reap() {
    fabric::Completion cq[kPollBatch];
    for (;;) {
      int n = s_.endpoint_->Poll(cq, kPollBatch);
      for (int i = 0; i < n; ++i) {
        const fabric::Completion& c = cq[i];
        if (c.op == fabric::Op::kSend) ++sh_.sends_done;
        if (c.op == fabric::Op::kRecv) {
          HandleRecv(c);
        } else if (c.error != 0) {
          if (!MovedOff()) Fail(c.error == EAGAIN ? ECONNRESET : c.error);
        } else if (c.id & kStagingTag) {
          uint64_t slot = c.id & ~kStagingTag;
          if (slot < kStagingSlots) sh_.slot_busy[slot] = 0;
        }
      }
      if (n < kPollBatch) return;
    }
  }

  // MOVE went either way: the SAN side of the connection carries nothing more.
  bool MovedOff() const { return sh_.move_sent || sh_.peer_moved; }

  // Sends what the state owes: FINACK, a combine buffer that may go, FIN, an explicit ACK; after a
  // MOVE only our MOVED.
  Status SendPending() {
    if (sh_.error) return Error();
    if (!sh_.wakeup_received) return Status::Ok();
    if (MovedOff()) {
      if (sh_.moved_owed && PostPacket(PacketType::kMoved, nullptr, 0, kDirectTag, false).ok()) {
        sh_.moved_owed = false;
      }
      return sh_.error ? Error() : Status::Ok();
    }
    if (sh_.close.finack_owed() && sh_.window.has_credit()) {
      Status st = PostPacket(PacketType::kFinAck, nullptr, 0, kDirectTag, true);
      if (st.ok()) sh_.close.FinAckSent();
    }
    if (sh_.fill_len > 0 && sh_.window.has_credit() &&
        (sh_.window.idle() || sh_.nodelay || sh_.fin_pending || sh_.fill_len >= PacketMax())) {
      FlushCombined();
    }
    if (sh_.fin_pending && sh_.fill_len == 0) {
      if (PostPacket(PacketType::kFin, nullptr, 0, kDirectTag, false).ok()) sh_.fin_pending = false;
    }
    if (sh_.acks.explicit_ack_due()) {
      if (PostPacket(PacketType::kAck, nullptr, 0, kDirectTag, false).ok()) {
        ++sh_.stats.explicit_acks_sent;
      }
    }
    return sh_.error ? Error() : Status::Ok();
  }

  Status Progress() {
    Reap();
    return SendPending();
  }

  Result<size_t> SendDirect(const iovec* iov, int iovcnt, size_t total) {
    const bool any_memory = s_.caps_ & fabric::kCapSendFromAnyMemory;
    IovCursor cursor(iov, iovcnt);
    size_t accepted = 0;
    while (accepted < total && sh_.window.has_credit()) {
      const size_t chunk = std::min<size_t>(total - accepted, PacketMax());
      fabric::Segment segs[fabric::kMaxSendSegments];
      int nsegs = 0;
      size_t bytes = 0;
      uint64_t id = kDirectTag;
      if (any_memory) {
        while (bytes < chunk && nsegs < fabric::kMaxSendSegments && !cursor.done()) {
          iovec piece = cursor.Take(chunk - bytes);
          segs[nsegs++] = fabric::Segment{piece.iov_base, static_cast<uint32_t>(piece.iov_len), 0};
          bytes += piece.iov_len;
        }
      } else {
        int slot = FreeSlot();
        if (slot < 0) {
          Reap();
          slot = FreeSlot();
          if (slot < 0) break;
        }
        while (bytes < chunk) {
          iovec piece = cursor.Take(chunk - bytes);
          memcpy(Slot(slot) + bytes, piece.iov_base, piece.iov_len);
          bytes += piece.iov_len;
        }
        segs[nsegs++] =
            fabric::Segment{Slot(slot), static_cast<uint32_t>(bytes), s_.staging_region_.key};
        id = kStagingTag | static_cast<uint64_t>(slot);
      }
      Status st = PostData(segs, nsegs, id, static_cast<uint32_t>(bytes));
      if (!st.ok()) {
        if (st.would_block()) break;
        return accepted ? Result<size_t>(accepted) : Result<size_t>(st);
      }
      if (id & kStagingTag) sh_.slot_busy[id & ~kStagingTag] = 1;
      accepted += bytes;
    }
    if (accepted == 0) return Status(EAGAIN, "window");
    return accepted;
  }

  // ---- Sends from the application's memory (docs/protocol.md "Large messages over verbs") ----

  bool ZeroCopyUsable(const iovec* iov, int iovcnt) const {
    const size_t min = s_.params_.zero_copy_min;
    return min != 0 && (s_.caps_ & fabric::kCapRegisteredSend) && !sh_.zero_copy_off &&
           iovcnt > 0 && iov[0].iov_len >= min && sh_.fill_len == 0 &&
           size_t{sh_.window.credits()} * PacketMax() >= min;
  }

  // Reaps until every send posted so far (up to `target`) has completed, or the connection
  // failed. Lets other threads of this stream in while the NIC works (a reader of the same
  // socket must not wait behind our send).
  void WaitSendsDone(uint64_t target) {
    for (uint32_t spins = 0; sh_.sends_done < target && sh_.error == 0; ++spins) {
      Reap();
      if (sh_.sends_done >= target || sh_.error != 0) break;
      if (spins < 64) {
        CpuRelax();
        continue;
      }
      sh_.lock.unlock();
      sched_yield();
      sh_.lock.lock();
    }
  }

  // Posts DATA packets straight from `buf` (registered for this call) and returns once the
  // provider completed every one of them. 0: not taken (the registration was refused; the caller
  // copies instead).
  Result<size_t> SendZeroCopy(const iovec& buf) {
    const size_t want = std::min<size_t>(buf.iov_len, size_t{sh_.window.credits()} * PacketMax());
    Result<fabric::MemoryRegion> reg = s_.endpoint_->RegisterSendMemory(buf.iov_base, want);
    if (!reg.ok()) {
      // A pinned-memory limit or a device that refuses: it would refuse again, each time a
      // syscall. (EFAULT, memory that is not there, faults in the copy as with any send.)
      sh_.zero_copy_off = true;
      ++sh_.stats.zero_copy_refused;
      return size_t{0};
    }
    const auto* base = static_cast<const std::byte*>(buf.iov_base);
    size_t accepted = 0;
    Status st;
    while (accepted < want && sh_.window.has_credit()) {
      const auto chunk = static_cast<uint32_t>(std::min<size_t>(want - accepted, PacketMax()));
      const fabric::Segment seg{base + accepted, chunk, reg->key};
      st = PostData(&seg, 1, kDirectTag, chunk);
      if (!st.ok()) break;
      accepted += chunk;
    }
    // The NIC reads the memory any time before each send's completion.
    WaitSendsDone(sh_.sends_posted);
    // After this the device reads nothing there, whatever is still outstanding (on a broken
    // connection: flushed sends).
    s_.endpoint_->DeregisterSendMemory(reg.value());
    if (accepted > 0) {
      ++sh_.stats.zero_copy_sends;
      sh_.stats.zero_copy_bytes_sent += accepted;
    }
    if (sh_.error) return Error();
    if (accepted == 0) return st.ok() || st.would_block() ? Status(EAGAIN, "window") : st;
    return accepted;
  }

  Result<size_t> Send(const iovec* iov, int iovcnt, size_t window_min) {
    Status st = Progress();
    if (!st.ok()) return st;
    if (sh_.close.fin_sent()) return Status(EPIPE, "send after shutdown");
    if (MovedOff()) return Status(kMovedToTcp, "moved to tcp");
    const size_t total = IovLength(iov, iovcnt);
    if (total == 0) return size_t{0};
    if (!sh_.wakeup_received) return Status(EAGAIN, "window not open");
    const SendPlan plan = PlanSend(Policy(), sh_.fill_len, total, sh_.window.idle());
    if (window_min != 0 && total >= window_min && !plan.append && sh_.adv_valid) {
      Result<size_t> w = SendToWindow(iov, iovcnt, total);
      if (!w.ok() || w.value() > 0) return w;
    }
    if (plan.flush_before) {
      st = FlushCombined();
      if (!st.ok()) return st.would_block() ? Status(EAGAIN, "window") : st;
    }
    if (!plan.append && ZeroCopyUsable(iov, iovcnt)) {
      Result<size_t> z = SendZeroCopy(iov[0]);
      if (!z.ok() || z.value() > 0) return z;
    }
    if (!plan.append) return SendDirect(iov, iovcnt, total);
    if (sh_.fill_slot < 0) {
      int slot = FreeSlot();
      if (slot < 0) {
        Reap();
        slot = FreeSlot();
        if (slot < 0) return Status(EAGAIN, "staging");
      }
      sh_.fill_slot = slot;
      sh_.fill_since_ns = NowNs();
    }
    std::byte* dst = Slot(sh_.fill_slot) + sh_.fill_len;
    for (int i = 0; i < iovcnt; ++i) {
      if (iov[i].iov_len == 0) continue;  // its base may be null: memcpy's is never
      memcpy(dst, iov[i].iov_base, iov[i].iov_len);
      dst += iov[i].iov_len;
    }
    sh_.fill_len += static_cast<uint32_t>(total);
    if (plan.flush_after) FlushCombined();  // without credit it goes when one comes back
    return total;
  }

  // ---- Sends from a file (san_sendfile) ----

  // One DATA packet of up to `want` file bytes at `offset`: read by the provider straight into the
  // peer's buffer (kCapSendFromFile), else into a staging slot and posted from there. Returns
  // the bytes sent; 0 with `read->error` when the file gave none.
  Result<size_t> PostFileData(int fd, off_t offset, uint32_t want, bool nowait,
                              fabric::FileRead* read) {
    const fabric::FileSlice file{fd, offset, want, nowait};
    fabric::SendWork work;
    if (s_.caps_ & fabric::kCapSendFromFile) {
      work.id = kDirectTag;
      Status st = PostVia(PacketType::kData, true, work, [&](const fabric::SendWork& w) {
        Status post = s_.endpoint_->PostSendFromFile(w, file, read);
        return post.ok() && read->bytes == 0 ? Status(kNothingPosted, "file") : post;
      });
      if (!st.ok()) return st.code() == kNothingPosted ? Result<size_t>(size_t{0}) : st;
    } else {
      int slot = FreeSlot();
      if (slot < 0) {
        Reap();
        slot = FreeSlot();
        if (slot < 0) return Status(EAGAIN, "staging");
      }
      *read = fabric::ReadFileSlice(file, Slot(static_cast<uint32_t>(slot)));
      if (read->bytes == 0) return size_t{0};
      work.id = kStagingTag | static_cast<uint64_t>(slot);
      work.num_segments = 1;
      work.segments[0] = {Slot(static_cast<uint32_t>(slot)), read->bytes, s_.staging_region_.key};
      Status st = PostVia(PacketType::kData, true, work,
                          [&](const fabric::SendWork& w) { return s_.endpoint_->PostSend(w); });
      if (!st.ok()) return st;
      sh_.slot_busy[slot] = 1;
    }
    sh_.stats.bytes_sent += read->bytes;
    sh_.out_bytes += read->bytes;
    return size_t{read->bytes};
  }

  Result<size_t> SendFile(int fd, off_t offset, size_t count, bool nowait, int* file_error) {
    *file_error = 0;
    Status st = Progress();
    if (!st.ok()) return st;
    if (sh_.close.fin_sent()) return Status(EPIPE, "send after shutdown");
    if (MovedOff()) return Status(kMovedToTcp, "moved to tcp");
    if (count == 0) return size_t{0};
    if (!sh_.wakeup_received) return Status(EAGAIN, "window not open");
    // Combined bytes were sent before these: they go first.
    st = FlushCombined();
    if (!st.ok()) return st.would_block() ? Status(EAGAIN, "window") : st;
    size_t accepted = 0;
    bool file_done = false;
    while (accepted < count && sh_.window.has_credit()) {
      const auto want = static_cast<uint32_t>(std::min<size_t>(count - accepted, PacketMax()));
      fabric::FileRead read;
      Result<size_t> n =
          PostFileData(fd, offset + static_cast<off_t>(accepted), want, nowait, &read);
      if (!n.ok()) {
        if (n.status().would_block()) break;
        return accepted ? Result<size_t>(accepted) : n;
      }
      accepted += n.value();
      if (n.value() < want) {  // end of file, a short read, or the file's error
        *file_error = n.value() == 0 ? read.error : 0;
        file_done = true;
        break;
      }
    }
    if (accepted == 0 && !file_done) return Status(EAGAIN, "window");
    return accepted;
  }

  Result<size_t> Recv(const iovec* iov, int iovcnt, bool peek, size_t offer_min) {
    Reap();  // first: credits that came back are what lets the flush below go out
    if (sh_.fill_len > 0) FlushCombined();  // SOVIA flush point: the application reads
    const bool offering = offer_min != 0 && !peek && iovcnt > 0 && iov[0].iov_len != 0;
    if (offering && OwnsWindow(iov[0].iov_base)) {
      // Our window is out. Its PUT comes before anything sent after it; data queued without a
      // PUT means the peer used the ring instead: take the window back and read normally.
      if (!sh_.win_put && sh_.rq_count == 0 && !sh_.close.peer_fin() && !sh_.error && !MovedOff()) {
        SendPending();
        return Status(EAGAIN, "waiting in a window");
      }
      Result<size_t> n = CloseWindow();
      if (!n.ok() || n.value() > 0) {
        SendPending();
        return n;
      }
    }
    if (sh_.lent) {  // a Borrow holds the first bytes: nothing can be read ahead of them
      SendPending();
      return Status(EAGAIN, "queued bytes are lent");
    }
    size_t copied = 0;
    uint32_t index = sh_.rq_head;
    uint32_t left = sh_.rq_count;
    uint32_t offset = left ? sh_.rq[index].offset : 0;
    for (int i = 0; i < iovcnt && left > 0; ++i) {
      size_t room = iov[i].iov_len;
      auto* out = static_cast<std::byte*>(iov[i].iov_base);
      while (room > 0 && left > 0) {
        const RecvEntry& e = sh_.rq[index];
        size_t n = std::min<size_t>(room, e.length - offset);
        memcpy(out, RecvBuffer(e.buffer) + offset, n);
        out += n;
        room -= n;
        copied += n;
        if (!peek) {
          ConsumeHead(static_cast<uint32_t>(n));
          index = sh_.rq_head;
          left = sh_.rq_count;
          offset = left ? sh_.rq[index].offset : 0;
          continue;
        }
        offset += static_cast<uint32_t>(n);
        if (offset == e.length) {
          index = (index + 1) % kMaxReceives;
          --left;
          offset = left ? sh_.rq[index].offset : 0;
        }
      }
    }
    if (copied > 0) {
      SendPending();
      return copied;
    }
    Result<size_t> r = NothingQueued();
    if (!r.ok() && r.status().code() == EAGAIN && offering && !peek) TryOffer(iov[0], offer_min);
    return r;
  }

  // What a read that finds nothing queued returns (after sending what the state owes): EOF (0)
  // after the peer's FIN -- even if the connection later broke (the peer released its side): what
  // arrived before the FIN was whole, as with a kernel socket --, the sticky error, the move to
  // TCP, or EAGAIN.
  Result<size_t> NothingQueued() {
    Status st = SendPending();
    if (sh_.close.peer_fin()) return size_t{0};
    if (!st.ok()) return st;
    if (MovedOff()) return Status(kMovedToTcp, "moved to tcp");
    return Status(EAGAIN, "no data");
  }

  // Delivers the first n bytes of the queue (n <= what its first entry holds); an emptied entry's
  // buffer goes back to the peer.
  void ConsumeHead(uint32_t n) {
    RecvEntry& e = sh_.rq[sh_.rq_head];
    e.offset += n;
    if (e.offset < e.length) return;
    sh_.rq_head = (sh_.rq_head + 1) % kMaxReceives;
    --sh_.rq_count;
    ReleaseCredited(e.buffer);
  }

  Result<std::span<const iovec>> Borrow(size_t max, std::span<iovec> room) {
    if (sh_.lent) return Status(EAGAIN, "queued bytes are lent");
    Reap();
    if (sh_.fill_len > 0) FlushCombined();  // the application reads: a flush point, as in Recv
    if (sh_.win_open) return Status(EAGAIN, "a window is out");  // its bytes come first
    if (sh_.rq_count == 0 || max == 0 || room.empty()) {
      Result<size_t> r = NothingQueued();
      if (!r.ok()) return r.status();
      return std::span<const iovec>();  // EOF
    }
    // At most half the window at once: the peer fills the other half meanwhile.
    const size_t pieces =
        std::min<size_t>({room.size(), sh_.rq_count, std::max<size_t>(1, s_.params_.window / 2)});
    size_t total = 0;
    size_t used = 0;
    while (used < pieces && total < max) {
      const RecvEntry& e = sh_.rq[(sh_.rq_head + used) % kMaxReceives];
      const size_t n = std::min<size_t>(max - total, e.length - e.offset);
      room[used++] = iovec{RecvBuffer(e.buffer) + e.offset, n};
      total += n;
    }
    sh_.lent = true;
    sh_.lent_buffer = sh_.rq[sh_.rq_head].buffer;
    sh_.lent_length = static_cast<uint32_t>(total);
    SendPending();
    return std::span<const iovec>(room.data(), used);
  }

  void GiveBack(size_t used) {
    if (!sh_.lent) return;
    sh_.lent = false;
    // The queue can only have changed under the loan if the stream was handed over meanwhile (a
    // move to TCP delivers the lent bytes from its own copy): then there is nothing to consume.
    const bool intact =
        sh_.rq_count > 0 && sh_.rq[sh_.rq_head].buffer == sh_.lent_buffer && !sh_.handed_over;
    for (size_t left = intact ? std::min<size_t>(used, sh_.lent_length) : 0; left > 0;) {
      const RecvEntry& e = sh_.rq[sh_.rq_head];
      const auto take = static_cast<uint32_t>(std::min<size_t>(left, e.length - e.offset));
      ConsumeHead(take);
      left -= take;
    }
    SendPending();
  }

 private:
  Stream& s_;
  StreamShared& sh_;
};

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
  l.sh().acks.set_threshold(params.ack_threshold);
  l.sh().account.set_window(params.window);
  l.sh().nodelay = !params.combine.enabled;
  for (uint32_t i = 0; i < params.receive_depth(); ++i) {
    Status st = l.Repost(i);
    if (!st.ok()) return st;
  }
  return s;
}

Status Stream::Export(StreamImage* out) {
  if (!(caps_ & fabric::kCapTransferable)) return Status(ENOTSUP, "Stream::Export");
  Locked l(*this);
  // A thread of ours is writing lent bytes out (Borrow): the importer would deliver them again.
  if (l.sh().lent) return Status(EBUSY, "Stream::Export: queued bytes are lent");
  StreamImage image;
  Status st = endpoint_->Export(&image.endpoint);
  if (!st.ok()) return st;
  image.state.resize(sizeof(StreamShared));
  memcpy(image.state.data(), static_cast<const void*>(shared_), sizeof(StreamShared));
  image.recv_region = recv_region_;
  image.staging_region = staging_region_;
  image.params = params_;
  image.provider_caps = caps_;
  *out = std::move(image);
  return Status::Ok();
}

Result<std::unique_ptr<Stream>> Stream::Import(fabric::Provider& provider, StreamImage image) {
  const StreamParams& p = image.params;
  if (image.state.size() != sizeof(StreamShared) || p.ack_threshold == 0 ||
      p.ack_threshold >= p.window || p.window > 255 || p.receive_depth() > kMaxReceives ||
      p.mtu < 64 || image.recv_region.length != size_t{p.receive_depth()} * p.mtu ||
      image.staging_region.length != size_t{kStagingSlots} * p.mtu) {
    return Status(EINVAL, "Stream::Import: image");
  }
  Result<std::unique_ptr<fabric::Endpoint>> ep = provider.Import(std::move(image.endpoint));
  if (!ep.ok()) return ep.status();
  if (p.mtu > ep.value()->mtu()) return Status(EINVAL, "Stream::Import: mtu");
  Result<fabric::MemoryRegion> recv = ep.value()->Reattach(image.recv_region);
  if (!recv.ok()) return recv.status();
  Result<fabric::MemoryRegion> staging = ep.value()->Reattach(image.staging_region);
  if (!staging.ok()) return staging.status();
  std::unique_ptr<Stream> s(new Stream(std::move(ep).value(), image.provider_caps, p));
  void* state = mmap(nullptr, sizeof(StreamShared), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (state == MAP_FAILED) return Status::FromErrno("mmap(stream state)");
  memcpy(state, image.state.data(), sizeof(StreamShared));
  s->shared_ = static_cast<StreamShared*>(state);
  // The exporter held the lock while copying; the connection is ours alone now.
  new (&s->shared_->lock) SpinLock();
  // The indices we will follow came from our own user's process, but a bad one must not become
  // a wild access: the same bounds the stream keeps for itself.
  // No single-copy window crosses a move: the importer is another process (the provider does not
  // let it expose windows, and an advert the exporter saw may be for memory of the exporter's).
  s->shared_->win_open = s->shared_->win_put = false;
  s->shared_->adv_valid = false;
  const StreamShared& sh = *s->shared_;
  if (sh.rq_head >= kMaxReceives || sh.rq_count > p.receive_depth() ||
      (sh.fill_slot != -1 && (sh.fill_slot < 0 || sh.fill_slot >= int32_t{kStagingSlots})) ||
      sh.fill_len > p.mtu) {
    return Status(EINVAL, "Stream::Import: state");
  }
  for (uint32_t i = 0; i < sh.rq_count; ++i) {
    const RecvEntry& e = sh.rq[(sh.rq_head + i) % kMaxReceives];
    if (e.buffer >= p.receive_depth() || e.length > p.mtu || e.offset > e.length) {
      return Status(EINVAL, "Stream::Import: receive queue");
    }
  }
  s->recv_region_ = recv.value();
  s->staging_region_ = staging.value();
  return s;
}

Status Stream::Start() { return Start(std::nullopt); }

std::optional<uint64_t> Stream::PeerTcpBytes() {
  Locked l(*this);
  l.Progress();
  if (!l.sh().peer_from_tcp) return std::nullopt;
  return l.sh().peer_tcp_bytes;
}

Status Stream::Start(std::optional<uint64_t> tcp_bytes) {
  Locked l(*this);
  StreamShared& sh = l.sh();
  if (sh.wakeup_sent) return Status::Ok();
  if (sh.error) return l.Error();
  WakeupBody body;
  body.window = static_cast<uint16_t>(params_.window);
  body.ack_reserve = static_cast<uint16_t>(params_.window / params_.ack_threshold + 1);
  body.buffer_size = params_.mtu;
  // Single copy: can we write into the peer's process? (The provider probes once.)
  sh.can_write = (caps_ & fabric::kCapSingleCopy) && (caps_ & fabric::kCapSendFromAnyMemory) &&
                 endpoint_->CanWriteWindows();
  if (sh.can_write) body.flags |= kWakeupCanWrite;
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
  sh.slot_busy[slot] = 1;
  sh.wakeup_sent = true;
  return Status::Ok();
}

Result<size_t> Stream::Send(const iovec* iov, int iovcnt, bool* left_buffered, size_t window_min) {
  Locked l(*this);
  Result<size_t> r = l.Send(iov, iovcnt, window_min);
  if (left_buffered) *left_buffered = l.sh().fill_len > 0;
  return r;
}

Result<size_t> Stream::SendFile(int fd, off_t offset, size_t count, bool nowait, int* file_error) {
  Locked l(*this);
  return l.SendFile(fd, offset, count, nowait, file_error);
}

Result<size_t> Stream::Recv(const iovec* iov, int iovcnt, bool peek, size_t offer_min) {
  Locked l(*this);
  return l.Recv(iov, iovcnt, peek, offer_min);
}

Result<std::span<const iovec>> Stream::Borrow(size_t max, std::span<iovec> room) {
  Locked l(*this);
  return l.Borrow(max, room);
}

void Stream::GiveBack(size_t used) {
  Locked l(*this);
  l.GiveBack(used);
}

Result<size_t> Stream::WithdrawWindow(const void* buffer) {
  Locked l(*this);
  if (!l.OwnsWindow(buffer)) return size_t{0};
  Result<size_t> n = l.CloseWindow();
  l.SendPending();
  return n;
}

size_t Stream::Available() {
  Locked l(*this);
  l.Progress();
  size_t n = 0;
  for (uint32_t i = 0; i < l.sh().rq_count; ++i) {
    const RecvEntry& e = l.sh().rq[(l.sh().rq_head + i) % kMaxReceives];
    n += e.length - e.offset;
  }
  return n;
}

Status Stream::Flush() {
  Locked l(*this);
  l.Reap();  // credits waiting in the completion queue count
  Status st = l.FlushCombined();
  return st.would_block() ? Status::Ok() : st;
}

bool Stream::FlushIfDue(uint64_t now_ns) {
  if (!shared_->lock.try_lock()) return true;  // whoever holds it is making progress; look again
  Locked l(*this, std::adopt_lock);
  StreamShared& sh = l.sh();
  if (sh.fill_len == 0) return false;
  // Not `now - since < timer`: a caller that read the clock before the data was buffered would
  // wrap around and flush at once.
  if (now_ns < sh.fill_since_ns + uint64_t{params_.combine_timer_us} * 1000) return true;
  l.Reap();
  l.FlushCombined();
  return sh.fill_len > 0;
}

Status Stream::ShutdownWrite() {
  Locked l(*this);
  if (l.sh().close.ShutdownWrite()) l.sh().fin_pending = true;
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
  r.error = sh.error;
  r.peer_closed = sh.close.peer_fin();
  r.write_closed = sh.close.fin_sent();
  r.readable = sh.rq_count > 0 || r.peer_closed || r.error || (sh.win_open && sh.win_put);
  r.moved = l.MovedOff();
  r.writable = !r.write_closed && sh.wakeup_received && !r.moved &&
               (sh.window.has_credit() || (sh.fill_len > 0 && sh.fill_len < l.PacketMax()));
  return r;
}

bool Stream::Finished() {
  Locked l(*this);
  l.Progress();
  const StreamShared& sh = l.sh();
  // Our FIN is acknowledged (so everything before it arrived) and we owe nothing: the peer's own
  // FIN is not waited for, as a kernel socket in FIN_WAIT_2 holds no application state either.
  return sh.close.fin_sent() && sh.close.fin_acked() && !sh.close.finack_owed() &&
         !sh.fin_pending && sh.fill_len == 0;
}

bool Stream::NothingLeftToPost() {
  Locked l(*this);
  l.Progress();
  return !l.sh().fin_pending || l.sh().error != 0 || endpoint_->broken() || l.MovedOff();
}

void Stream::Abort() {
  Locked l(*this);
  l.Fail(ECONNRESET);
}

void Stream::Fail(int error) {
  Locked l(*this);
  l.Fail(error);
}

Status Stream::BeginMove() {
  Locked l(*this);
  StreamShared& sh = l.sh();
  l.Progress();
  if (sh.error) return l.Error();
  if (!sh.wakeup_received) return Status(ENOTCONN, "move: connection not open");
  if (sh.peer_moved) return Status(EBUSY, "move: the peer is moving");
  if (sh.move_sent) return Status::Ok();
  l.FlushCombined();  // without credit the bytes go in the handover instead
  Status st = l.PostPacket(PacketType::kMove, nullptr, 0, kDirectTag, false);
  if (!st.ok()) return st;
  sh.move_sent = true;
  sh.adv_valid = false;
  sh.moved.store(true, std::memory_order_release);
  return Status::Ok();
}

Result<bool> Stream::MoveAcknowledged() {
  Locked l(*this);
  l.Reap();
  if (l.sh().error) return l.Error();
  return l.sh().move_acked;
}

TcpHandover Stream::TakeForTcp() {
  Locked l(*this);
  StreamShared& sh = l.sh();
  l.Reap();
  TcpHandover h;
  for (uint32_t i = 0; i < sh.rq_count; ++i) {
    const RecvEntry& e = sh.rq[(sh.rq_head + i) % kMaxReceives];
    const std::byte* from = l.RecvBuffer(e.buffer) + e.offset;
    h.returned.insert(h.returned.end(), from, from + (e.length - e.offset));
  }
  sh.rq_count = 0;
  if (sh.fill_len > 0) {
    const std::byte* from = l.Slot(sh.fill_slot);
    h.unsent.assign(from, from + sh.fill_len);
    sh.fill_len = 0;
    sh.fill_slot = -1;
  }
  h.fin = sh.close.fin_sent();
  sh.handed_over = true;
  return h;
}

Result<bool> Stream::Relay(RelayIo& io) {
  Locked l(*this);
  StreamShared& sh = l.sh();
  l.Progress();  // our MOVED first: the mover writes nothing on the kernel socket before it
  if (sh.handed_over) return true;  // we moved: there is nothing to relay
  if (!sh.peer_moved) return Status(EINVAL, "relay: the peer did not move");
  if (sh.error) return l.Error();
  if (sh.moved_owed) return Status(EAGAIN, "relay: MOVED not posted yet");
  // `waits`: the kernel socket event that lets this step go on.
  auto kernel_error = [&](const char* what, short waits) -> Status {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      sh.relay_waits.store(waits, std::memory_order_relaxed);
      return Status(EAGAIN, what);
    }
    return l.Fail(ECONNRESET);
  };
  sh.relay_waits.store(POLLIN, std::memory_order_relaxed);
  std::byte chunk[kRelayChunk];
  if (sh.relay_phase == kRelayHeader) {
    const ssize_t n = io.Peek(chunk, MoveHeader::kSize);
    if (n < 0) return kernel_error("relay: header", POLLIN);
    if (n == 0) return l.Fail(ECONNRESET);  // the mover gave up before its header
    if (static_cast<size_t>(n) < MoveHeader::kSize) return Status(EAGAIN, "relay: header");
    Result<MoveHeader> h = DecodeMoveHeader(chunk, MoveHeader::kSize);
    // We cannot have more bytes in the mover's hands than a full window of our packets.
    if (!h.ok() || h->returned > uint64_t{sh.window.window()} * l.PacketMax()) {
      return l.Fail(ECONNRESET);
    }
    if (io.Consume(chunk, MoveHeader::kSize) != static_cast<ssize_t>(MoveHeader::kSize)) {
      return l.Fail(ECONNRESET);
    }
    sh.relay_left = h->returned;
    sh.relay_phase = kRelayEcho;
  }
  while (sh.relay_phase == kRelayEcho && sh.relay_left > 0) {
    // Peek, write what the kernel takes, then consume exactly that: nothing is held here, so a
    // partial write leaves the rest where it was.
    const ssize_t n = io.Peek(chunk, std::min<uint64_t>(sizeof chunk, sh.relay_left));
    if (n < 0) return kernel_error("relay: returned bytes", POLLIN);
    if (n == 0) return l.Fail(ECONNRESET);
    const ssize_t w = io.Write(chunk, static_cast<size_t>(n));
    if (w < 0) return kernel_error("relay: echo", POLLOUT);
    if (io.Consume(chunk, static_cast<size_t>(w)) != w) return l.Fail(ECONNRESET);
    sh.relay_left -= static_cast<uint64_t>(w);
  }
  if (sh.relay_phase == kRelayEcho) sh.relay_phase = kRelayUnsent;
  while (sh.relay_phase == kRelayUnsent && sh.relay_written < sh.fill_len) {
    const ssize_t w =
        io.Write(l.Slot(sh.fill_slot) + sh.relay_written, sh.fill_len - sh.relay_written);
    if (w < 0) return kernel_error("relay: unsent bytes", POLLOUT);
    sh.relay_written += static_cast<uint32_t>(w);
  }
  if (sh.relay_phase == kRelayUnsent) {
    sh.fill_len = 0;
    sh.fill_slot = -1;
    sh.relay_phase = kRelayDone;
  }
  sh.relay_waits.store(0, std::memory_order_relaxed);
  if (sh.close.fin_sent() && !sh.relay_shut) {
    io.ShutdownWrite();
    sh.relay_shut = true;
  }
  return true;
}

bool Stream::Moved() const { return shared_->moved.load(std::memory_order_acquire); }

short Stream::RelayWaitsFor() const { return shared_->relay_waits.load(std::memory_order_relaxed); }

void Stream::AddUser() { shared_->users.fetch_add(1, std::memory_order_acq_rel); }

bool Stream::DropUser() { return shared_->users.fetch_sub(1, std::memory_order_acq_rel) == 1; }

void Stream::SetNoDelay(bool nodelay) {
  Locked l(*this);
  l.sh().nodelay = nodelay || !params_.combine.enabled;
  if (l.sh().nodelay) l.Progress();  // setting TCP_NODELAY pushes what is buffered
}

bool Stream::nodelay() {
  Locked l(*this);
  return l.sh().nodelay;
}

StreamStats Stream::Stats() {
  Locked l(*this);
  StreamStats s = l.sh().stats;
  s.credits = l.sh().window.credits();
  s.window = l.sh().window.window();
  s.mtu = l.sh().peer_buffer_size ? l.PacketMax() : params_.mtu;
  s.phase = l.sh().close.phase();
  s.single_copy_out = l.sh().can_write;
  s.single_copy_in = l.sh().peer_can_write && endpoint_->CanExposeWindows();
  return s;
}

}  // namespace san::proto
