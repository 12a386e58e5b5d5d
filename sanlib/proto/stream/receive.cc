// Receiving into memory: Recv (copying out of the receive buffers, or through a single-copy
// window) and FIONREAD.
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "sanlib/proto/stream.h"
#include "sanlib/proto/stream/locked.h"

namespace san::proto {

using stream::kMaxReceives;
using stream::RecvEntry;

// Only Stream::Recv calls it: inlined there, one function with the lock as before the split
// (the call cost ~5 % of the instructions of a small receive).
[[gnu::always_inline]] inline Result<size_t> Stream::Locked::Recv(const iovec* iov, int iovcnt,
                                                                  bool peek, size_t offer_min) {
  Reap();  // first: credits that came back are what lets the flush below go out
  if (sh_.staging.fill_len > 0) FlushCombined();  // SOVIA flush point: the application reads
  const bool offering = offer_min != 0 && !peek && iovcnt > 0 && iov[0].iov_len != 0;
  if (offering && OwnsWindow(iov[0].iov_base)) {
    // Our window is out. Its PUT comes before anything sent after it; data queued without a
    // PUT means the peer used the ring instead: take the window back and read normally.
    if (!sh_.single_copy.win_put && sh_.recv.count == 0 && !sh_.link.close.peer_fin() &&
        !sh_.link.error && !MovedOff()) {
      SendPending();
      return Status(EAGAIN, "waiting in a window");
    }
    Result<size_t> n = CloseWindow();
    if (!n.ok() || n.value() > 0) {
      SendPending();
      return n;
    }
  }
  if (sh_.recv.lent) {  // a Borrow holds the first bytes: nothing can be read ahead of them
    SendPending();
    return Status(EAGAIN, "queued bytes are lent");
  }
  size_t copied = 0;
  uint32_t index = sh_.recv.head;
  uint32_t left = sh_.recv.count;
  uint32_t offset = left ? sh_.recv.entries[index].offset : 0;
  for (int i = 0; i < iovcnt && left > 0; ++i) {
    size_t room = iov[i].iov_len;
    auto* out = static_cast<std::byte*>(iov[i].iov_base);
    while (room > 0 && left > 0) {
      const RecvEntry& e = sh_.recv.entries[index];
      size_t n = std::min<size_t>(room, e.length - offset);
      memcpy(out, RecvBuffer(e.buffer) + offset, n);
      out += n;
      room -= n;
      copied += n;
      if (!peek) {
        ConsumeHead(static_cast<uint32_t>(n));
        index = sh_.recv.head;
        left = sh_.recv.count;
        offset = left ? sh_.recv.entries[index].offset : 0;
        continue;
      }
      offset += static_cast<uint32_t>(n);
      if (offset == e.length) {
        index = (index + 1) % kMaxReceives;
        --left;
        offset = left ? sh_.recv.entries[index].offset : 0;
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

Result<size_t> Stream::Locked::NothingQueued() {
  Status st = SendPending();
  if (sh_.link.close.peer_fin()) return size_t{0};
  if (!st.ok()) return st;
  if (MovedOff()) return Status(kMovedToTcp, "moved to tcp");
  return Status(EAGAIN, "no data");
}

void Stream::Locked::ConsumeHead(uint32_t n) {
  RecvEntry& e = sh_.recv.entries[sh_.recv.head];
  e.offset += n;
  if (e.offset < e.length) return;
  sh_.recv.head = (sh_.recv.head + 1) % kMaxReceives;
  --sh_.recv.count;
  ReleaseCredited(e.buffer);
}

Result<size_t> Stream::Recv(const iovec* iov, int iovcnt, bool peek, size_t offer_min) {
  Locked l(*this);
  return l.Recv(iov, iovcnt, peek, offer_min);
}

size_t Stream::Available() {
  Locked l(*this);
  l.Progress();
  size_t n = 0;
  for (uint32_t i = 0; i < l.sh().recv.count; ++i) {
    const RecvEntry& e = l.sh().recv.entries[(l.sh().recv.head + i) % kMaxReceives];
    n += e.length - e.offset;
  }
  return n;
}

}  // namespace san::proto
