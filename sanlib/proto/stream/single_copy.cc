// Single copy (docs/protocol.md "Single copy"): the receiving side exposes application memory as a
// window (ADVERT), the sending side writes into it once with process_vm_writev and says how much
// with a PUT; windows are withdrawn by the receiver before its buffer goes back to the caller.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "sanlib/common/clock.h"
#include "sanlib/common/spin_lock.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/stream/iov.h"
#include "sanlib/proto/stream/locked.h"

namespace san::proto {

using stream::IovCursor;
using stream::kDirectTag;
using stream::SingleCopyState;

namespace {

// The largest window we expose and the most one write moves (a revoker may have to wait for one
// write: keep it to a few milliseconds).
constexpr uint32_t kMaxWindowBytes = 16u << 20;
// How long a receiver whose window was written waits for the writer's PUT (posted right after
// the write by a correct peer).
constexpr uint64_t kPutWaitNs = 1'000'000'000;

}  // namespace

bool Stream::Locked::OwnsWindow(const void* buffer) const {
  return sh_.single_copy.win_open &&
         sh_.single_copy.win_addr == reinterpret_cast<uintptr_t>(buffer) &&
         sh_.single_copy.win_pid == ThisPid();
}

Status Stream::Locked::PostPut(uint32_t generation, uint32_t length) {
  PutBody body;
  body.generation = generation;
  body.length = length;
  std::byte bytes[PutBody::kSize];
  EncodePut(body, bytes);
  fabric::Segment seg{bytes, PutBody::kSize, 0};
  return PostPacket(PacketType::kPut, &seg, 1, kDirectTag, true);
}

bool Stream::Locked::TryOffer(const iovec& buf, size_t offer_min) {
  if (!SingleCopyProvider() || !sh_.single_copy.peer_can_write || !sh_.link.wakeup_received ||
      sh_.single_copy.win_open || MovedOff() || sh_.link.error || sh_.link.close.peer_fin() ||
      sh_.link.close.fin_sent() || sh_.recv.count != 0 || !sh_.link.window.has_credit() ||
      buf.iov_len < offer_min) {
    return false;
  }
  // Only when the peer has been sending big messages: an ADVERT per small message would cost
  // a packet each way for nothing.
  if (sh_.single_copy.big_memory == 0) return false;
  if (!s_.endpoint_->CanExposeWindows()) return false;
  const uint32_t len = static_cast<uint32_t>(std::min<size_t>(buf.iov_len, kMaxWindowBytes));
  Result<fabric::WindowKey> key = s_.endpoint_->ExposeWindow(buf.iov_base, len);
  if (!key.ok()) return false;
  AdvertBody body;
  body.generation = key->generation;
  body.stream_offset = sh_.link.in_bytes;
  body.addr = key->addr;
  body.length = len;
  std::byte bytes[AdvertBody::kSize];
  EncodeAdvert(body, bytes);
  fabric::Segment seg{bytes, AdvertBody::kSize, 0};
  if (!PostPacket(PacketType::kAdvert, &seg, 1, kDirectTag, true).ok()) {
    s_.endpoint_->RevokeWindow();  // nobody has the key: unused
    return false;
  }
  sh_.single_copy.win_open = true;
  sh_.single_copy.win_put = false;
  sh_.single_copy.win_pid = ThisPid();
  sh_.single_copy.win_generation = key->generation;
  sh_.single_copy.win_len = len;
  sh_.single_copy.win_put_len = 0;
  sh_.single_copy.win_addr = key->addr;
  sh_.single_copy.win_offset = sh_.link.in_bytes;
  ++sh_.stats.windows_offered;
  return true;
}

Result<size_t> Stream::Locked::CloseWindow() {
  Result<fabric::WindowFate> fate = s_.endpoint_->RevokeWindow();
  if (!fate.ok()) {
    sh_.single_copy.win_open = sh_.single_copy.win_put = false;
    return Fail(ECONNRESET);
  }
  if (fate.value() == fabric::WindowFate::kWritten && !sh_.single_copy.win_put) {
    const uint64_t deadline = NowNs() + kPutWaitNs;
    while (!sh_.single_copy.win_put && !sh_.link.error) {
      Reap();
      if (sh_.single_copy.win_put || sh_.link.error) break;
      if (NowNs() > deadline) {
        Fail(ECONNRESET);
        break;
      }
      CpuRelax();
    }
  }
  const bool put = sh_.single_copy.win_put;
  const uint32_t n = put ? sh_.single_copy.win_put_len : 0;
  sh_.single_copy.win_open = sh_.single_copy.win_put = false;
  // A PUT that claims bytes nobody wrote (the window was never claimed) is a lie.
  if (fate.value() == fabric::WindowFate::kUnused && n > 0) return Violation();
  if (n > 0) {
    ++sh_.stats.windows_filled;
    return size_t{n};
  }
  if (sh_.link.error) return Error();
  return size_t{0};
}

Result<size_t> Stream::Locked::SendToWindow(const iovec* iov, int iovcnt, size_t total) {
  if (!sh_.single_copy.adv_valid || !sh_.single_copy.can_write || !sh_.link.window.has_credit())
    return size_t{0};
  sh_.single_copy.adv_valid = false;  // a window is written at most once, whatever happens now
  // Our stream must be exactly where the peer's receive stands: nothing in flight, nothing
  // buffered. Otherwise the window would receive bytes out of order: leave it (the peer
  // revokes it when our packets arrive).
  if (sh_.single_copy.adv.stream_offset != sh_.link.out_bytes || sh_.staging.fill_len != 0)
    return size_t{0};
  const size_t want = std::min<size_t>({total, sh_.single_copy.adv.length, kMaxWindowBytes});
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
  key.addr = sh_.single_copy.adv.addr;
  key.length = sh_.single_copy.adv.length;
  key.generation = sh_.single_copy.adv.generation;
  Result<size_t> w = s_.endpoint_->WriteWindow(key, segs, nsegs);
  if (!w.ok()) {
    if (w.status().code() == ECANCELED) return size_t{0};  // revoked first: nothing written
    // Refused (EPERM/ENOSYS: a seccomp filter, Yama, a non-dumpable peer...) or failed: no
    // single copy on this connection any more, and the peer must stop waiting on its window.
    sh_.single_copy.can_write = false;
    Status st = PostPut(key.generation, 0);
    if (!st.ok()) return st.would_block() ? Fail(ECONNRESET) : st;
    return size_t{0};
  }
  // The bytes are in the peer's buffer; it learns how many from the PUT. Without it the two
  // streams would disagree, so a PUT that cannot go fails the connection.
  Status st = PostPut(key.generation, static_cast<uint32_t>(w.value()));
  if (!st.ok()) return Fail(st.would_block() ? ECONNRESET : st.code());
  sh_.link.out_bytes += w.value();
  sh_.stats.bytes_sent += w.value();
  sh_.stats.single_copy_bytes_sent += w.value();
  return w.value();
}

Result<size_t> Stream::WithdrawWindow(const void* buffer) {
  Locked l(*this);
  if (!l.OwnsWindow(buffer)) return size_t{0};
  Result<size_t> n = l.CloseWindow();
  l.SendPending();
  return n;
}

Status Stream::Locked::OnAdvert(uint32_t buffer, uint32_t length) {
  Result<AdvertBody> body = DecodeAdvert(RecvBuffer(buffer), length);
  if (!body.ok() || !sh_.link.account.Arrived().ok()) return Violation();
  // Kept only if we can use it; addr and length are the peer's claims about its own memory
  // (the provider writes only into the process it validated, at most `length` bytes).
  if (sh_.single_copy.can_write) {
    sh_.single_copy.adv = body.value();
    sh_.single_copy.adv_valid = true;
  }
  return ReleaseCredited(buffer);
}

Status Stream::Locked::OnPut(uint32_t buffer, uint32_t length) {
  SingleCopyState& sc = sh_.single_copy;
  Result<PutBody> body = DecodePut(RecvBuffer(buffer), length);
  if (!body.ok() || !sh_.link.account.Arrived().ok()) return Violation();
  if (body->length == 0) {  // declined: the peer cannot write into our windows
    sc.peer_can_write = false;
    if (sc.win_open && !sc.win_put && body->generation == sc.win_generation) {
      sc.win_put = true;
      sc.win_put_len = 0;
    }
    return ReleaseCredited(buffer);
  }
  // Bytes in our window: the open one, with nothing of the stream between its ADVERT and this
  // PUT, and no more than it holds.
  if (!sc.win_open || sc.win_put || body->generation != sc.win_generation ||
      body->length > sc.win_len || sh_.link.in_bytes != sc.win_offset ||
      sh_.link.close.peer_fin()) {
    return Violation();
  }
  sc.win_put = true;
  sc.win_put_len = body->length;
  sh_.link.in_bytes += body->length;
  sc.big_memory = SingleCopyState::kBigMemory;
  sh_.stats.bytes_received += body->length;
  sh_.stats.single_copy_bytes_received += body->length;
  return ReleaseCredited(buffer);
}

}  // namespace san::proto
