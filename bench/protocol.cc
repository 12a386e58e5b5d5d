#include "protocol.h"

namespace san::bench {

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kLatency:
      return "latency";
    case Kind::kBandwidth:
      return "bandwidth";
    case Kind::kQuit:
      return "quit";
  }
  return "?";
}

const char* ModeName(Mode mode) { return mode == Mode::kSpin ? "spin" : "block"; }

Pattern::Pattern(size_t max_span) : data_(kPeriod + max_span) {
  for (size_t i = 0; i < data_.size(); ++i) {
    const uint64_t j = i % kPeriod;
    const uint64_t h = (j + 1) * 0x9E3779B97F4A7C15ull;
    data_[i] = static_cast<std::byte>((h >> 29) ^ (h >> 47));
  }
}

void WriteStamp(void* message, size_t size, uint64_t iteration) {
  std::memcpy(message, &iteration, size < 8 ? size : 8);
}

bool StampMatches(const void* message, size_t size, uint64_t iteration) {
  return std::memcmp(message, &iteration, size < 8 ? size : 8) == 0;
}

}  // namespace san::bench
