// Stream::Locked: a Stream's operations, run with its lock held (private to the stream's
// implementation files).
//
// Constructing one takes the stream's process-shared lock; its methods read and write the state
// block (stream/state.h) and call the endpoint. Nothing here sleeps: "would block" is EAGAIN, and
// the socket layer decides how to wait. The one wait is WaitSendsDone (zero copy), which spins and
// yields, letting other threads in, until the provider completed our sends.
//
// The methods are defined by concern, one file each: the link's per-packet work inline in
// stream/link_inl.h (included at the end of this header), creation and readiness in stream.cc,
// then stream/send.cc (staging and combining), receive.cc, single_copy.cc, zero_copy.cc, file.cc
// (sendfile and Borrow), tcp_move.cc and image.cc.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>

#include "sanlib/fabric/provider.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/stream/state.h"
#include "sanlib/proto/wire.h"

namespace san::proto {

// PostVia's "the file gave nothing, so nothing was posted" (no endpoint call returns it).
inline constexpr int kNothingPosted = ENODATA;

class Stream::Locked {
 public:
  explicit Locked(Stream& s) : s_(s), sh_(*s.shared_) { sh_.lock.lock(); }
  // Takes over a lock the caller already acquired (try_lock).
  Locked(Stream& s, std::adopt_lock_t) : s_(s), sh_(*s.shared_) {}
  ~Locked() {
    BumpVersion();
    sh_.lock.unlock();
  }
  Locked(const Locked&) = delete;
  Locked& operator=(const Locked&) = delete;

  StreamShared& sh() { return sh_; }
  // The state may have changed: a reader of Stream::Version looks again. Before every release of
  // the lock.
  void BumpVersion() {
    sh_.version.store(sh_.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  // The version once this scope has released the lock (GetReadiness's stamp).
  uint64_t VersionAtRelease() const { return sh_.version.load(std::memory_order_relaxed) + 1; }

  // ---- The link (stream/link_inl.h) ----

  // Makes `error` the sticky error (unless there is one already) and disconnects the endpoint.
  Status Fail(int error) {
    if (sh_.link.error == 0) {
      sh_.link.error = error;
      s_.endpoint_->Disconnect();
    }
    return Status(sh_.link.error, "san stream");
  }
  Status Error() const { return Status(sh_.link.error, "san stream"); }
  // The peer broke the protocol (EPROTO, unless the connection had already failed otherwise).
  Status Violation() {
    sh_.link.violated = true;
    return Fail(EPROTO);
  }

  std::byte* RecvBuffer(uint32_t i) const {
    return s_.recv_region_.addr + size_t{i} * s_.params_.mtu;
  }
  std::byte* Slot(uint32_t i) const { return s_.staging_region_.addr + size_t{i} * s_.params_.mtu; }
  uint32_t depth() const { return s_.params_.receive_depth(); }

  // Largest DATA payload we may send: the peer's buffer size, our staging size, the provider's MTU.
  uint32_t PacketMax() const {
    return std::min({sh_.link.peer_buffer_size, s_.params_.mtu, s_.endpoint_->mtu()});
  }
  // MOVE went either way: the SAN side of the connection carries nothing more.
  bool MovedOff() const { return sh_.move.sent || sh_.move.peer_moved; }

  // Posts receive buffer `buffer` again.
  Status Repost(uint32_t buffer);
  // A buffer whose packet used one of the window's credits is free again: report it to the peer.
  Status ReleaseCredited(uint32_t buffer);

  // Posts one packet of `type` from `segs` (an id with kStagingTag names the slot it occupies).
  // EAGAIN without credit (for a packet that consumes one) or with the send queue full.
  Status PostPacket(PacketType type, const fabric::Segment* segs, int nsegs, uint64_t id,
                    bool consumes_credit);
  // A DATA packet of `bytes` stream bytes.
  Status PostData(const fabric::Segment* segs, int nsegs, uint64_t id, uint32_t bytes);

  // Puts the header on `work` and posts it with `post` (the endpoint call), retrying while the
  // send queue is full. `post` may return kNothingPosted: not sent, not an error.
  template <typename PostFn>
  Status PostVia(PacketType type, bool consumes_credit, fabric::SendWork& work, PostFn post) {
    if (consumes_credit && !sh_.link.window.has_credit()) return Status(EAGAIN, "window");
    Header h;
    h.type = type;
    h.seq = sh_.link.send_seq;
    h.credits = sh_.link.acks.Take();
    work.imm = EncodeImm(h);
    Status st = post(work);
    for (int attempt = 0; st.would_block() && attempt < 3; ++attempt) {
      Reap();  // send completions free send-queue entries
      st = post(work);
    }
    if (!st.ok()) {
      for (uint32_t i = 0; i < h.credits; ++i) sh_.link.acks.Freed();  // not reported after all
      if (st.would_block() || st.code() == kNothingPosted) return st;
      return Fail(st.code());
    }
    ++sh_.link.send_seq;
    ++sh_.link.sends_posted;
    ++sh_.stats.packets_sent;
    if (consumes_credit) sh_.link.window.Consume();
    return Status::Ok();
  }

  // Handles one received packet. Everything the peer controls is checked here (and in the
  // feature's handler it dispatches to).
  Status HandleRecv(const fabric::Completion& c);
  // Reaps every completion that is there and updates state; sends nothing itself except reposted
  // receives (so it can be called from inside PostPacket).
  void Reap();
  // Sends what the state owes: FINACK, a combine buffer that may go, FIN, an explicit ACK; after a
  // MOVE only our MOVED.
  Status SendPending();
  // Reap, then SendPending.
  Status Progress();

  // ---- Send staging and combining (stream/send.cc) ----

  CombinePolicy Policy() const {
    CombinePolicy p = s_.params_.combine;
    p.enabled = p.enabled && !sh_.link.nodelay;
    p.mtu = PacketMax();
    return p;
  }
  // A staging slot neither in flight nor being filled, or -1.
  int FreeSlot() const {
    for (uint32_t i = 0; i < stream::kStagingSlots; ++i) {
      if (!sh_.staging.busy[i] && static_cast<int32_t>(i) != sh_.staging.fill_slot) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }
  // FreeSlot, reaping completions first if none is free; -1 if still none.
  int TakeFreeSlot();
  // Posts the combine buffer as one DATA packet (EAGAIN without credit). Nothing after a MOVE:
  // the relay or the handover carries those bytes.
  Status FlushCombined();
  // Posts `iov` as DATA packets as far as the window allows, from the caller's memory where the
  // provider can send from anywhere, else copied through staging slots.
  Result<size_t> SendDirect(const iovec* iov, int iovcnt, size_t total);
  Result<size_t> Send(const iovec* iov, int iovcnt, size_t window_min);

  // ---- Receiving (stream/receive.cc) ----

  Result<size_t> Recv(const iovec* iov, int iovcnt, bool peek, size_t offer_min);
  // What a read that finds nothing queued returns (after sending what the state owes): EOF (0)
  // after the peer's FIN -- even if the connection later broke (the peer released its side): what
  // arrived before the FIN was whole, as with a kernel socket --, the sticky error, the move to
  // TCP, or EAGAIN.
  Result<size_t> NothingQueued();
  // Delivers the first n bytes of the queue (n <= what its first entry holds); an emptied entry's
  // buffer goes back to the peer.
  void ConsumeHead(uint32_t n);

  // ---- Single copy (stream/single_copy.cc, docs/protocol.md "Single copy") ----

  bool SingleCopyProvider() const {
    return (s_.caps_ & fabric::kCapSingleCopy) && (s_.caps_ & fabric::kCapSendFromAnyMemory);
  }
  bool OwnsWindow(const void* buffer) const;
  // Small bodies (ADVERT, PUT) go from the stack: single copy requires kCapSendFromAnyMemory.
  Status PostPut(uint32_t generation, uint32_t length);
  // Receiving side: with nothing queued, expose `buf` and advertise it. False: not now (the
  // caller just waits for packets as usual).
  bool TryOffer(const iovec& buf, size_t offer_min);
  // Receiving side: ends our open window. After the provider's revoke nothing lands in it; if the
  // peer wrote, its PUT follows the write at once, and we wait (bounded) for it to learn how much.
  Result<size_t> CloseWindow();
  // Sending side: writes the start of `iov` straight into the peer's advertised window, if there
  // is one we may use now. Returns bytes sent that way (0: use the ring), or a connection error.
  Result<size_t> SendToWindow(const iovec* iov, int iovcnt, size_t total);
  // An ADVERT or PUT in receive buffer `buffer` (HandleRecv checked its header).
  Status OnAdvert(uint32_t buffer, uint32_t length);
  Status OnPut(uint32_t buffer, uint32_t length);

  // ---- Sends from the application's memory (stream/zero_copy.cc) ----

  bool ZeroCopyUsable(const iovec* iov, int iovcnt) const;
  // Reaps until every send posted so far (up to `target`) has completed, or the connection
  // failed. Lets other threads of this stream in while the NIC works (a reader of the same
  // socket must not wait behind our send).
  void WaitSendsDone(uint64_t target);
  // Posts DATA packets straight from `buf` (registered for this call) and returns once the
  // provider completed every one of them. 0: not taken (the registration was refused; the caller
  // copies instead).
  Result<size_t> SendZeroCopy(const iovec& buf);

  // ---- Sends from a file, and lending received bytes (stream/file.cc) ----

  // One DATA packet of up to `want` file bytes at `offset`: read by the provider straight into the
  // peer's buffer (kCapSendFromFile), else into a staging slot and posted from there. Returns
  // the bytes sent; 0 with `read->error` when the file gave none.
  Result<size_t> PostFileData(int fd, off_t offset, uint32_t want, bool nowait,
                              fabric::FileRead* read);
  Result<size_t> SendFile(int fd, off_t offset, size_t count, bool nowait, int* file_error);
  Result<std::span<const iovec>> Borrow(size_t max, std::span<iovec> room);
  void GiveBack(size_t used);

  // ---- Moving to TCP (stream/tcp_move.cc) ----

  // The peer's MOVE or MOVED in receive buffer `buffer` (HandleRecv checked its header).
  Status OnMove(uint32_t buffer, uint32_t length);
  Status OnMoved(uint32_t buffer, uint32_t length);

 private:
  Stream& s_;
  StreamShared& sh_;
};

}  // namespace san::proto

#include "sanlib/proto/stream/link_inl.h"  // IWYU pragma: export
