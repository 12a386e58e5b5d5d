// The shm segment: the one memfd region a client creates per connection and hands to the server.
// It holds everything the two processes share; nothing in it is a pointer (offsets only, relative
// to the segment base, because the two sides map it at different addresses).
//
//   +--------------------+  0
//   | SegmentHeader      |  magic, version, geometry (64 B)
//   +--------------------+
//   | SideBlock[0]       |  client's inbound side: armed flag, gone flag,
//   |                    |  receive-descriptor ring (posted by client, consumed by server),
//   |                    |  completion ring (written by server, consumed by client),
//   |                    |  single-copy window state (client exposes, server writes)
//   +--------------------+
//   | SideBlock[1]       |  the same for the server
//   +--------------------+  page aligned
//   | arena[0]           |  client's buffers (AllocateBuffer), arena_bytes[0]
//   +--------------------+  page aligned
//   | arena[1]           |  server's buffers, arena_bytes[1]
//   +--------------------+  total (page rounded)
//
// Thread-safety: every field two parties touch is a std::atomic (lock-free, so it is also
// process-shared); each index/flag that one side writes and the other reads sits on its own
// 64-byte line. Trust: the peer can write anything anywhere in here at any time. Readers copy a
// field once into a local and validate it against their own private limits (see docs/fabric.md);
// the geometry used for bounds checks is computed by each side itself (ComputeLayout), never read
// back from the header. Host-local, so native byte order.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace san::fabric::shm {

constexpr uint64_t kSegmentMagic = 0x314d48534e415300ull;  // "\0SANSHM1"
constexpr uint32_t kSegmentVersion = 2;                    // 2: SideBlock::window (single copy)
// Slots per ring (both rings of both sides). Bounds EndpointAttr::recv_depth.
constexpr uint32_t kRingSlots = 512;
constexpr uint32_t kRingMask = kRingSlots - 1;
static_assert((kRingSlots & kRingMask) == 0, "ring size must be a power of two");
// Largest arena a side may declare (a hostile header cannot make us map more than this).
constexpr uint64_t kMaxArenaBytes = 1ull << 30;
constexpr size_t kCacheLine = 64;
constexpr size_t kArenaAlign = 4096;

// A receive descriptor: "my next receive buffer is at [offset, offset+length) of the segment".
// Published by storing `seq` (release) after the other fields; see ring.h for the seq rule.
struct RecvDesc {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> length;
  std::atomic<uint64_t> offset;
};
static_assert(sizeof(RecvDesc) == 16);

// A receive completion: "the message for your receive number seq-1 is `length` bytes, with imm".
struct RecvCompletion {
  std::atomic<uint32_t> seq;
  std::atomic<uint32_t> length;
  std::atomic<uint32_t> imm;
  std::atomic<uint32_t> reserved;
};
static_assert(sizeof(RecvCompletion) == 16);
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "shared-memory atomics must be lock-free to be process-shared");

struct alignas(kCacheLine) SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t ring_slots;
  uint64_t arena_bytes[2];
  uint64_t total_bytes;
};
static_assert(sizeof(SegmentHeader) == kCacheLine);

// Everything about one side's inbound direction. Side 0 = client, side 1 = server.
struct SideBlock {
  // Set by the owner when it is about to sleep on its doorbell; cleared (exchange) by the peer
  // that rings the doorbell.
  alignas(kCacheLine) std::atomic<uint32_t> armed;
  // Set by the owner on Disconnect() or when it detects a violation: the peer breaks too.
  alignas(kCacheLine) std::atomic<uint32_t> gone;
  // Single copy: the state of the window the owner exposes (WindowWord). The owner opens and
  // revokes it, the peer claims it (CAS) and marks it written. Peer-writable like everything here:
  // a value the owner did not expect breaks the connection.
  alignas(kCacheLine) std::atomic<uint64_t> window;
  // Owner posts, peer consumes.
  alignas(kCacheLine) RecvDesc recv_ring[kRingSlots];
  // Peer writes, owner consumes.
  alignas(kCacheLine) RecvCompletion completion_ring[kRingSlots];
};
static_assert(sizeof(SideBlock) % kCacheLine == 0);

// SideBlock::window: (generation << 2) | state. Only one exposure per side at a time; a
// generation names it, so a writer holding the key of an earlier one never matches.
//   owner: ExposeWindow   store  (g, kOpen)
//   peer:  WriteWindow    CAS    (g, kOpen) -> (g, kBusy); process_vm_writev; store (g, kDone)
//   owner: RevokeWindow   CAS    (g, kOpen) -> (g, kIdle)   => nothing was or will be written
//                         else   (g, kBusy): wait for (g, kDone); (g, kDone): written
enum class WindowState : uint64_t { kIdle = 0, kOpen = 1, kBusy = 2, kDone = 3 };
constexpr uint64_t WindowWord(uint32_t generation, WindowState state) {
  return (uint64_t{generation} << 2) | static_cast<uint64_t>(state);
}

// Where everything is, computed from the two arena sizes only.
struct Layout {
  size_t side_offset[2];
  size_t arena_offset[2];
  size_t arena_bytes[2];
  size_t total_bytes;
};

constexpr size_t AlignUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

// The arena sizes must already be checked (<= kMaxArenaBytes).
constexpr Layout ComputeLayout(size_t arena0, size_t arena1) {
  Layout l{};
  l.side_offset[0] = sizeof(SegmentHeader);
  l.side_offset[1] = l.side_offset[0] + sizeof(SideBlock);
  l.arena_offset[0] = AlignUp(l.side_offset[1] + sizeof(SideBlock), kArenaAlign);
  l.arena_bytes[0] = arena0;
  l.arena_offset[1] = AlignUp(l.arena_offset[0] + arena0, kArenaAlign);
  l.arena_bytes[1] = arena1;
  l.total_bytes = AlignUp(l.arena_offset[1] + arena1, kArenaAlign);
  return l;
}

}  // namespace san::fabric::shm
