// Checksum: CRC-32C (Castagnoli, the iSCSI/ext4 polynomial) over a byte stream, to confirm a
// Push or Pull arrived byte-exact (an integrity check against bugs and truncation, not against an
// attacker: the token is the security).
//
// Why CRC-32C: it used to be FNV-1a 64, one multiply per byte in a dependent chain (~0.7 GB/s):
// `perf record` of a 145 MB Push showed it at 43-46 % of the CPU of each end, on both transports,
// the largest single cost of a file transfer. CRC-32C has an instruction on x86-64 (SSE4.2
// `crc32`); run as three interleaved lanes it checks several GB/s. Without SSE4.2 a table
// (slicing-by-8) computes the same value.
//
// Thread-safety: one instance per stream; the free functions are pure (the lane-combining table
// is built once, thread-safely, on first use).
#pragma once

#include <cstddef>
#include <cstdint>

namespace san::drpc {

class Checksum {
 public:
  void Update(const void* data, size_t len);
  // The CRC-32C of every byte given so far (0 for none), zero-extended.
  uint64_t value() const { return ~reg_; }

 private:
  uint32_t reg_ = 0xffffffffu;
};

// The raw CRC-32C register step (no initial or final inversion), exposed so the tests can check
// that the two implementations agree on every length and alignment. Crc32cHardware must only be
// called when Crc32cHardwareAvailable().
uint32_t Crc32cSoftware(uint32_t reg, const unsigned char* p, size_t len);
uint32_t Crc32cHardware(uint32_t reg, const unsigned char* p, size_t len);
bool Crc32cHardwareAvailable();

}  // namespace san::drpc
