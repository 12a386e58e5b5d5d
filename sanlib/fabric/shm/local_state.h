// LocalState: one shm endpoint's own mutable bookkeeping (its positions in the rings, the table of
// receives it posted, its queue of send completions, whether the connection broke).
//
// It lives in an anonymous MAP_SHARED region, not in the segment and not on the heap:
//  - not in the segment, because the peer can write the segment, and these are the private limits
//    that everything read from the segment is checked against;
//  - not on the heap, because after fork() the parent and the child must see one copy (either may
//    carry on with the connection; the socket layer serialises them).
//
// Thread-safety: the endpoint's sending thread writes the send-side fields, its receiving/polling
// thread the receive-side ones; the fields the two threads share are atomics on separate lines.
// Ownership: LocalRegion owns the mapping (RAII) and unmaps it on destruction; a fork child has
// its own LocalRegion object mapping the same pages.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "sanlib/common/status.h"
#include "sanlib/fabric/shm/shm_layout.h"

namespace san::fabric::shm {

// What we remember about a receive we posted (the peer only ever sees offset and length).
struct PostedRecv {
  uint64_t id;
  uint32_t length;
  uint32_t reserved;
};

struct LocalState {
  // Sending thread: next position in the peer's descriptor ring == in its completion ring.
  alignas(kCacheLine) std::atomic<uint64_t> sent;
  // Sending thread: send completions queued (send_ids[sendq_tail % size]).
  alignas(kCacheLine) std::atomic<uint64_t> sendq_tail;
  // Polling thread: send completions reaped.
  alignas(kCacheLine) std::atomic<uint64_t> sendq_head;
  // Receiving thread: receives posted (our descriptor ring position).
  alignas(kCacheLine) std::atomic<uint64_t> recv_posted;
  // Polling thread: receives completed (delivered or flushed) == our completion ring position.
  alignas(kCacheLine) std::atomic<uint64_t> recv_done;
  std::atomic<uint32_t> empty_polls;
  // 0 while healthy; else the errno that explains why it broke (first cause wins).
  alignas(kCacheLine) std::atomic<int> broken_reason;
  std::atomic<uint64_t> last_liveness_check_ns;
  std::atomic<uint64_t> arena_used;  // AllocateBuffer's bump pointer
  std::atomic<uint32_t> connected;
  // Single copy. Receiving thread: generation of the last window exposed, and whether it is
  // exposed now. Sending thread: what the probe found about writing into the peer (0 not probed
  // yet, 1 permitted, 2 refused: for good on this connection).
  std::atomic<uint32_t> window_generation;
  std::atomic<uint32_t> window_exposed;
  std::atomic<uint32_t> write_probe;
  PostedRecv posted[kRingSlots];  // indexed by position % kRingSlots
  // Followed by uint64_t send_ids[send_queue_size] (see LocalRegion).
};

class LocalRegion {
 public:
  LocalRegion() = default;
  LocalRegion(LocalRegion&& other) noexcept;
  LocalRegion& operator=(LocalRegion&& other) noexcept;
  LocalRegion(const LocalRegion&) = delete;
  LocalRegion& operator=(const LocalRegion&) = delete;
  ~LocalRegion();

  // A zeroed region with room for `send_queue_size` (a power of two) send ids.
  static Result<LocalRegion> Create(uint32_t send_queue_size);

  LocalState* state() const { return static_cast<LocalState*>(data_); }
  // The whole region as bytes (for moving an endpoint to another process).
  std::byte* bytes() const { return static_cast<std::byte*>(data_); }
  size_t size() const { return size_; }
  static size_t SizeFor(uint32_t send_queue_size) {
    return sizeof(LocalState) + size_t{send_queue_size} * sizeof(uint64_t);
  }
  uint64_t* send_ids() const {
    return reinterpret_cast<uint64_t*>(static_cast<std::byte*>(data_) + sizeof(LocalState));
  }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace san::fabric::shm
