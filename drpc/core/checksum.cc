#include "drpc/core/checksum.h"

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace san::drpc {
namespace {

constexpr uint32_t kPoly = 0x82f63b78u;  // Castagnoli, bit-reflected

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// Slicing-by-8: table k advances a byte that has k more bytes after it.
constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t r = i;
    for (int b = 0; b < 8; ++b) r = (r >> 1) ^ ((r & 1) ? kPoly : 0);
    t[0][i] = r;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
  return t;
}
constexpr Tables kTables = MakeTables();

uint64_t Load64(const unsigned char* p) {
  uint64_t w;
  memcpy(&w, p, sizeof w);
  return w;
}

#if defined(__x86_64__)
// The three lanes of Crc32cHardware run over kLane bytes each; the first two are then moved
// forward over the bytes that follow them with ShiftTable, the linear map "feed kLane zero
// bytes", applied a byte of the register at a time.
constexpr size_t kLane = 4096;

struct ShiftTable {
  std::array<std::array<uint32_t, 256>, 4> t;
  uint32_t operator()(uint32_t x) const {
    return t[0][x & 0xff] ^ t[1][(x >> 8) & 0xff] ^ t[2][(x >> 16) & 0xff] ^ t[3][x >> 24];
  }
};

const ShiftTable& LaneShift() {
  static const ShiftTable table = [] {
    static const unsigned char zeros[kLane] = {};
    uint32_t basis[32];
    for (int i = 0; i < 32; ++i) basis[i] = Crc32cSoftware(1u << i, zeros, kLane);
    ShiftTable s{};
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t v = 0;
        for (int bit = 0; bit < 8; ++bit) {
          if (b & (1u << bit)) v ^= basis[8 * k + bit];
        }
        s.t[k][b] = v;
      }
    }
    return s;
  }();
  return table;
}
#endif

}  // namespace

uint32_t Crc32cSoftware(uint32_t reg, const unsigned char* p, size_t len) {
  if constexpr (std::endian::native == std::endian::little) {
    for (; len >= 8; p += 8, len -= 8) {
      const uint64_t w = Load64(p) ^ reg;
      reg = kTables[7][w & 0xff] ^ kTables[6][(w >> 8) & 0xff] ^ kTables[5][(w >> 16) & 0xff] ^
            kTables[4][(w >> 24) & 0xff] ^ kTables[3][(w >> 32) & 0xff] ^
            kTables[2][(w >> 40) & 0xff] ^ kTables[1][(w >> 48) & 0xff] ^ kTables[0][w >> 56];
    }
  }
  for (; len > 0; ++p, --len) reg = (reg >> 8) ^ kTables[0][(reg ^ *p) & 0xff];
  return reg;
}

#if defined(__x86_64__)
bool Crc32cHardwareAvailable() {
  static const bool available = __builtin_cpu_supports("sse4.2");
  return available;
}

__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(uint32_t reg, const unsigned char* p,
                                                          size_t len) {
  // One crc32 instruction has a latency of three cycles and a throughput of one: three
  // independent lanes keep it busy.
  if (len >= 3 * kLane) {
    const ShiftTable& shift = LaneShift();
    for (; len >= 3 * kLane; p += 3 * kLane, len -= 3 * kLane) {
      uint64_t a = reg, b = 0, c = 0;
      for (size_t i = 0; i < kLane; i += 8) {
        a = _mm_crc32_u64(a, Load64(p + i));
        b = _mm_crc32_u64(b, Load64(p + kLane + i));
        c = _mm_crc32_u64(c, Load64(p + 2 * kLane + i));
      }
      reg = shift(shift(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^
            static_cast<uint32_t>(c);
    }
  }
  uint64_t r = reg;
  for (; len >= 8; p += 8, len -= 8) r = _mm_crc32_u64(r, Load64(p));
  reg = static_cast<uint32_t>(r);
  for (; len > 0; ++p, --len) reg = _mm_crc32_u8(reg, *p);
  return reg;
}
#else
bool Crc32cHardwareAvailable() { return false; }
uint32_t Crc32cHardware(uint32_t reg, const unsigned char* p, size_t len) {
  return Crc32cSoftware(reg, p, len);
}
#endif

void Checksum::Update(const void* data, size_t len) {
  const auto* p = static_cast<const unsigned char*>(data);
  reg_ = Crc32cHardwareAvailable() ? Crc32cHardware(reg_, p, len) : Crc32cSoftware(reg_, p, len);
}

}  // namespace san::drpc
