// FNV-1a, 64 bit: a cheap, stable hash of a few bytes (names derived from addresses, an id of a
// boot). Not for anything a peer may choose to collide with. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace san {

constexpr uint64_t kFnv1aSeed = 1469598103934665603ull;

// Continues the hash `h` over `n` bytes at `p`.
inline uint64_t Fnv1a(const void* p, size_t n, uint64_t h = kFnv1aSeed) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

}  // namespace san
