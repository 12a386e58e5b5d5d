// Sending from memory: staging slots, combining small sends (combiner.h) and the combine timer's
// flush, and the Send path that picks single copy, zero copy, a direct post or the combine buffer.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "sanlib/common/clock.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/stream/iov.h"
#include "sanlib/proto/stream/locked.h"

namespace san::proto {

using stream::IovCursor;
using stream::IovLength;
using stream::kDirectTag;
using stream::kStagingTag;

int Stream::Locked::TakeFreeSlot() {
  int slot = FreeSlot();
  if (slot < 0) {
    Reap();  // send completions free slots
    slot = FreeSlot();
  }
  return slot;
}

Status Stream::Locked::FlushCombined() {
  if (sh_.staging.fill_len == 0 || MovedOff()) return Status::Ok();  // moved: the relay writes them
  fabric::Segment seg{Slot(sh_.staging.fill_slot), sh_.staging.fill_len, s_.staging_region_.key};
  Status st = PostData(&seg, 1, kStagingTag | static_cast<uint64_t>(sh_.staging.fill_slot),
                       sh_.staging.fill_len);
  if (!st.ok()) return st;
  sh_.staging.busy[sh_.staging.fill_slot] = 1;
  sh_.staging.fill_slot = -1;
  sh_.staging.fill_len = 0;
  return Status::Ok();
}

Result<size_t> Stream::Locked::SendDirect(const iovec* iov, int iovcnt, size_t total) {
  const bool any_memory = s_.caps_ & fabric::kCapSendFromAnyMemory;
  IovCursor cursor(iov, iovcnt);
  size_t accepted = 0;
  while (accepted < total && sh_.link.window.has_credit()) {
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
      const int slot = TakeFreeSlot();
      if (slot < 0) break;
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
    if (id & kStagingTag) sh_.staging.busy[id & ~kStagingTag] = 1;
    accepted += bytes;
  }
  if (accepted == 0) return Status(EAGAIN, "window");
  return accepted;
}

// Only Stream::Send calls it: inlined there, one function with the lock as before the split
// (the call cost ~5 % of the instructions of a combined small send).
[[gnu::always_inline]] inline Result<size_t> Stream::Locked::Send(const iovec* iov, int iovcnt,
                                                                  size_t window_min) {
  Status st = Progress();
  if (!st.ok()) return st;
  if (sh_.link.close.fin_sent()) return Status(EPIPE, "send after shutdown");
  if (MovedOff()) return Status(kMovedToTcp, "moved to tcp");
  const size_t total = IovLength(iov, iovcnt);
  if (total == 0) return size_t{0};
  if (!sh_.link.wakeup_received) return Status(EAGAIN, "window not open");
  const SendPlan plan = PlanSend(Policy(), sh_.staging.fill_len, total, sh_.link.window.idle());
  if (window_min != 0 && total >= window_min && !plan.append && sh_.single_copy.adv_valid) {
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
  if (sh_.staging.fill_slot < 0) {
    const int slot = TakeFreeSlot();
    if (slot < 0) return Status(EAGAIN, "staging");
    sh_.staging.fill_slot = slot;
    sh_.staging.fill_since_ns = NowNs();
  }
  std::byte* dst = Slot(sh_.staging.fill_slot) + sh_.staging.fill_len;
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len == 0) continue;  // its base may be null: memcpy's is never
    memcpy(dst, iov[i].iov_base, iov[i].iov_len);
    dst += iov[i].iov_len;
  }
  sh_.staging.fill_len += static_cast<uint32_t>(total);
  if (plan.flush_after) FlushCombined();  // without credit it goes when one comes back
  return total;
}

Result<size_t> Stream::Send(const iovec* iov, int iovcnt, bool* left_buffered, size_t window_min) {
  Locked l(*this);
  Result<size_t> r = l.Send(iov, iovcnt, window_min);
  if (left_buffered) *left_buffered = l.sh().staging.fill_len > 0;
  return r;
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
  if (sh.staging.fill_len == 0) return false;
  // Not `now - since < timer`: a caller that read the clock before the data was buffered would
  // wrap around and flush at once.
  if (now_ns < sh.staging.fill_since_ns + uint64_t{params_.combine_timer_us} * 1000) return true;
  l.Reap();
  l.FlushCombined();
  return sh.staging.fill_len > 0;
}

}  // namespace san::proto
