// Beyond memory: san_sendfile's path (file bytes posted as DATA, read by the provider straight into
// the peer's buffers where it can) and san_recvfile's loan of received bytes where they lie
// (Borrow / GiveBack).
#include <sys/types.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <span>

#include "sanlib/proto/stream.h"
#include "sanlib/proto/stream/locked.h"

namespace san::proto {

using stream::kDirectTag;
using stream::kMaxReceives;
using stream::kStagingTag;
using stream::RecvEntry;

Result<size_t> Stream::Locked::PostFileData(int fd, off_t offset, uint32_t want, bool nowait,
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
    const int slot = TakeFreeSlot();
    if (slot < 0) return Status(EAGAIN, "staging");
    *read = fabric::ReadFileSlice(file, Slot(static_cast<uint32_t>(slot)));
    if (read->bytes == 0) return size_t{0};
    work.id = kStagingTag | static_cast<uint64_t>(slot);
    work.num_segments = 1;
    work.segments[0] = {Slot(static_cast<uint32_t>(slot)), read->bytes, s_.staging_region_.key};
    Status st = PostVia(PacketType::kData, true, work,
                        [&](const fabric::SendWork& w) { return s_.endpoint_->PostSend(w); });
    if (!st.ok()) return st;
    sh_.staging.busy[slot] = 1;
  }
  sh_.stats.bytes_sent += read->bytes;
  sh_.link.out_bytes += read->bytes;
  return size_t{read->bytes};
}

Result<size_t> Stream::Locked::SendFile(int fd, off_t offset, size_t count, bool nowait,
                                        int* file_error) {
  *file_error = 0;
  Status st = Progress();
  if (!st.ok()) return st;
  if (sh_.link.close.fin_sent()) return Status(EPIPE, "send after shutdown");
  if (MovedOff()) return Status(kMovedToTcp, "moved to tcp");
  if (count == 0) return size_t{0};
  if (!sh_.link.wakeup_received) return Status(EAGAIN, "window not open");
  // Combined bytes were sent before these: they go first.
  st = FlushCombined();
  if (!st.ok()) return st.would_block() ? Status(EAGAIN, "window") : st;
  size_t accepted = 0;
  bool file_done = false;
  while (accepted < count && sh_.link.window.has_credit()) {
    const auto want = static_cast<uint32_t>(std::min<size_t>(count - accepted, PacketMax()));
    fabric::FileRead read;
    Result<size_t> n = PostFileData(fd, offset + static_cast<off_t>(accepted), want, nowait, &read);
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

Result<std::span<const iovec>> Stream::Locked::Borrow(size_t max, std::span<iovec> room) {
  if (sh_.recv.lent) return Status(EAGAIN, "queued bytes are lent");
  Reap();
  if (sh_.staging.fill_len > 0)
    FlushCombined();  // the application reads: a flush point, as in Recv
  if (sh_.single_copy.win_open) return Status(EAGAIN, "a window is out");  // its bytes come first
  if (sh_.recv.count == 0 || max == 0 || room.empty()) {
    Result<size_t> r = NothingQueued();
    if (!r.ok()) return r.status();
    return std::span<const iovec>();  // EOF
  }
  // At most half the window at once: the peer fills the other half meanwhile.
  const size_t pieces =
      std::min<size_t>({room.size(), sh_.recv.count, std::max<size_t>(1, s_.params_.window / 2)});
  size_t total = 0;
  size_t used = 0;
  while (used < pieces && total < max) {
    const RecvEntry& e = sh_.recv.entries[(sh_.recv.head + used) % kMaxReceives];
    const size_t n = std::min<size_t>(max - total, e.length - e.offset);
    room[used++] = iovec{RecvBuffer(e.buffer) + e.offset, n};
    total += n;
  }
  sh_.recv.lent = true;
  sh_.recv.lent_buffer = sh_.recv.entries[sh_.recv.head].buffer;
  sh_.recv.lent_length = static_cast<uint32_t>(total);
  SendPending();
  return std::span<const iovec>(room.data(), used);
}

void Stream::Locked::GiveBack(size_t used) {
  if (!sh_.recv.lent) return;
  sh_.recv.lent = false;
  // The queue can only have changed under the loan if the stream was handed over meanwhile (a
  // move to TCP delivers the lent bytes from its own copy): then there is nothing to consume.
  const bool intact = sh_.recv.count > 0 &&
                      sh_.recv.entries[sh_.recv.head].buffer == sh_.recv.lent_buffer &&
                      !sh_.move.handed_over;
  for (size_t left = intact ? std::min<size_t>(used, sh_.recv.lent_length) : 0; left > 0;) {
    const RecvEntry& e = sh_.recv.entries[sh_.recv.head];
    const auto take = static_cast<uint32_t>(std::min<size_t>(left, e.length - e.offset));
    ConsumeHead(take);
    left -= take;
  }
  SendPending();
}

Result<size_t> Stream::SendFile(int fd, off_t offset, size_t count, bool nowait, int* file_error) {
  Locked l(*this);
  return l.SendFile(fd, offset, count, nowait, file_error);
}

Result<std::span<const iovec>> Stream::Borrow(size_t max, std::span<iovec> room) {
  Locked l(*this);
  return l.Borrow(max, room);
}

void Stream::GiveBack(size_t used) {
  Locked l(*this);
  l.GiveBack(used);
}

}  // namespace san::proto
