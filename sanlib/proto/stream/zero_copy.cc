// Sends from the application's memory (StreamParams::zero_copy_min, docs/protocol.md "Large
// messages over verbs"): DATA packets posted from a buffer registered for the call, which returns
// once the provider completed every one of them.
#include <sched.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "sanlib/common/spin_lock.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/stream/locked.h"

namespace san::proto {

using stream::kDirectTag;

bool Stream::Locked::ZeroCopyUsable(const iovec* iov, int iovcnt) const {
  const size_t min = s_.params_.zero_copy_min;
  return min != 0 && (s_.caps_ & fabric::kCapRegisteredSend) && !sh_.zero_copy.off && iovcnt > 0 &&
         iov[0].iov_len >= min && sh_.staging.fill_len == 0 &&
         size_t{sh_.link.window.credits()} * PacketMax() >= min;
}

void Stream::Locked::WaitSendsDone(uint64_t target) {
  for (uint32_t spins = 0; sh_.link.sends_done < target && sh_.link.error == 0; ++spins) {
    Reap();
    if (sh_.link.sends_done >= target || sh_.link.error != 0) break;
    if (spins < 64) {
      CpuRelax();
      continue;
    }
    BumpVersion();
    sh_.lock.unlock();
    sched_yield();
    sh_.lock.lock();
  }
}

Result<size_t> Stream::Locked::SendZeroCopy(const iovec& buf) {
  const size_t want =
      std::min<size_t>(buf.iov_len, size_t{sh_.link.window.credits()} * PacketMax());
  Result<fabric::MemoryRegion> reg = s_.endpoint_->RegisterSendMemory(buf.iov_base, want);
  if (!reg.ok()) {
    // A pinned-memory limit or a device that refuses: it would refuse again, each time a
    // syscall. (EFAULT, memory that is not there, faults in the copy as with any send.)
    sh_.zero_copy.off = true;
    ++sh_.stats.zero_copy_refused;
    return size_t{0};
  }
  const auto* base = static_cast<const std::byte*>(buf.iov_base);
  size_t accepted = 0;
  Status st;
  while (accepted < want && sh_.link.window.has_credit()) {
    const auto chunk = static_cast<uint32_t>(std::min<size_t>(want - accepted, PacketMax()));
    const fabric::Segment seg{base + accepted, chunk, reg->key};
    st = PostData(&seg, 1, kDirectTag, chunk);
    if (!st.ok()) break;
    accepted += chunk;
  }
  // The NIC reads the memory any time before each send's completion.
  WaitSendsDone(sh_.link.sends_posted);
  // After this the device reads nothing there, whatever is still outstanding (on a broken
  // connection: flushed sends).
  s_.endpoint_->DeregisterSendMemory(reg.value());
  if (accepted > 0) {
    ++sh_.stats.zero_copy_sends;
    sh_.stats.zero_copy_bytes_sent += accepted;
  }
  if (sh_.link.error) return Error();
  if (accepted == 0) return st.ok() || st.would_block() ? Status(EAGAIN, "window") : st;
  return accepted;
}

}  // namespace san::proto
