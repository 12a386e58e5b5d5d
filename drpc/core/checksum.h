// Checksum: FNV-1a 64 over a byte stream, to confirm a Push or Pull arrived byte-exact (an
// integrity check against bugs and truncation, not against an attacker: the token is the
// security). Thread-safety: one instance per stream.
#pragma once

#include <cstddef>
#include <cstdint>

namespace san::drpc {

class Checksum {
 public:
  void Update(const void* data, size_t len);
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 14695981039346656037ULL;
};

}  // namespace san::drpc
