// The sequence rule shared by both shm rings (receive descriptors and receive completions).
//
// Each ring has exactly one producer and one consumer, and neither reads the other's index: a slot
// is published by storing seq = position + 1 (release) after its payload fields, and the consumer,
// which knows the position it expects next, loads seq (acquire) and classifies it:
//   seq == position + 1              -> ready
//   seq == what the previous lap left -> empty (nothing published yet)
//   anything else                     -> corrupt (only a hostile or broken peer writes that)
// Space is guaranteed by credit, not by reading the consumer's index: a side never has more than
// recv_depth <= kRingSlots receives outstanding (posted and not yet reaped), and every descriptor
// yields exactly one completion, so a producer never laps its consumer. This keeps the hot path to
// one shared cache line per ring slot and lets a hostile peer corrupt only values we validate.
//
// Thread-safety: pure functions. Positions are 64-bit and never wrap in practice; seq is the low
// 32 bits of position + 1.
#pragma once

#include <cstdint>

#include "sanlib/fabric/shm/shm_layout.h"

namespace san::fabric::shm {

enum class SlotState { kReady, kEmpty, kCorrupt };

inline uint32_t PublishedSeq(uint64_t position) { return static_cast<uint32_t>(position + 1); }

inline uint32_t EmptySeq(uint64_t position) {
  return position < kRingSlots ? 0u : static_cast<uint32_t>(position + 1 - kRingSlots);
}

inline SlotState ClassifySlot(uint32_t seq, uint64_t position) {
  if (seq == PublishedSeq(position)) return SlotState::kReady;
  if (seq == EmptySeq(position)) return SlotState::kEmpty;
  return SlotState::kCorrupt;
}

}  // namespace san::fabric::shm
