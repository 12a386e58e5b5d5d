// What the two san-bench processes say to each other, for every transport, and the payload pattern
// they check data against.
//
// A connection carries one point's setup, then any number of phases (warm-up, measurement):
//
//   client                                   server
//   ConnectionSetup {kind, size, nodelay} -> (raw shm: in the ConnectData of the rendezvous)
//   PhaseHeader {count}                   -> latency:   echo `count` messages of `size` bytes
//   size bytes  <-> size bytes  (x count)              bandwidth: sink count*size bytes, then
//                                         <- SinkReport {elapsed, bytes, errors, credits}
//   PhaseHeader ...                          ... until the client closes the connection.
//
// A connection whose setup says kQuit ends the server process's work.
//
// Byte order is native on purpose: both ends are the same binary on the same host (the benchmark
// never crosses machines), and a magic number and version catch a stray peer. Plain structs,
// fixed-width fields, sizes checked below.
// Thread-safety: plain values. Pattern is immutable after construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace san::bench {

enum class Kind : uint8_t { kLatency = 1, kBandwidth = 2, kQuit = 3 };
enum class Mode : uint8_t { kSpin = 0, kBlock = 1 };

const char* KindName(Kind kind);  // "latency", "bandwidth", "quit"
const char* ModeName(Mode mode);  // "spin", "block"

constexpr uint32_t kSetupMagic = 0x53424e31;  // "SBN1": san-bench protocol, version 1
constexpr uint32_t kPhaseMagic = 0x53425048;

struct ConnectionSetup {
  uint32_t magic = kSetupMagic;
  uint8_t kind = 0;     // Kind
  uint8_t nodelay = 0;  // TCP_NODELAY on both ends (sanlib: combining off)
  uint16_t reserved = 0;
  uint32_t size = 0;  // message size of every phase on this connection
};
static_assert(sizeof(ConnectionSetup) == 12);

struct PhaseHeader {
  uint32_t magic = kPhaseMagic;
  uint32_t reserved = 0;
  uint64_t count = 0;  // round trips (latency) or messages (bandwidth)
};
static_assert(sizeof(PhaseHeader) == 16);

// The bandwidth receiver's account of one phase, sent back to the sender when it has everything.
struct SinkReport {
  uint64_t elapsed_ns = 0;  // from the first receive's return to the last one's
  uint64_t bytes = 0;       // bytes received in that interval (the first receive's excluded)
  uint64_t errors = 0;      // sampled chunks whose contents did not match the pattern
  uint64_t credits = 0;     // raw shm only: receives re-posted and not yet credited to the sender
};
static_assert(sizeof(SinkReport) == 32);

// The bytes every sender sends: stream offset o carries Byte(o mod kPeriod). The period is not a
// power of two, so a lost, duplicated or misplaced message of any power-of-two size shows up as a
// mismatch, and a multiple of 64 so that sources stay cache-line aligned whenever o is.
class Pattern {
 public:
  static constexpr size_t kPeriod = 64 * 1021;

  // Any span of up to `max_span` bytes starting at any offset can be read contiguously.
  explicit Pattern(size_t max_span);

  const std::byte* At(uint64_t offset) const { return data_.data() + offset % kPeriod; }
  bool Matches(uint64_t offset, const void* bytes, size_t length) const {
    return std::memcmp(At(offset), bytes, length) == 0;
  }

 private:
  std::vector<std::byte> data_;
};

// Latency messages carry the iteration number in their first bytes (up to 8), so every echo is
// checked cheaply and a stale or reordered reply is caught.
void WriteStamp(void* message, size_t size, uint64_t iteration);
bool StampMatches(const void* message, size_t size, uint64_t iteration);

}  // namespace san::bench
