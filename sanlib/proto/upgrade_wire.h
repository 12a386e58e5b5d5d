// The in-band upgrade's messages (san_upgrade(): DESIGN.md "Connection establishment", point 4),
// exchanged over an established kernel TCP connection before its data moves to a SAN channel.
// docs/protocol.md "In-band upgrade" draws the exchange. All fields little-endian, fixed size.
//
//   Hello  (40 B, both sides at once)   magic "SANUPG" 0x00 version | flags u32 | reserved u32 |
//                                       netns dev u64 | netns inode u64 | boot id hash u64
//   Offer  (16 B, the listening side)   magic "SANO" | status i32 | IPv4 address (network order)
//                                       | port (network order) | reserved u16
//   Result (8 B, both sides at once)    magic "SANR" | status i32 (0 = this side is ready)
//
// Pure functions; thread-safe. Decoding never trusts input: a wrong magic, version or reserved
// field is EPROTO (the peer is not running san_upgrade, or is a different version).
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>

#include "sanlib/common/status.h"

namespace san::proto {

struct UpgradeHello {
  static constexpr size_t kSize = 40;
  static constexpr uint8_t kVersion = 1;
  static constexpr uint32_t kFlagShm = 1u << 0;  // this side can use the shm provider
  uint32_t flags = 0;
  uint64_t netns_dev = 0;  // which network namespace: shm reaches only inside one
  uint64_t netns_inode = 0;
  uint64_t boot_id = 0;  // which host (boot): the same inode on two hosts means nothing
};

struct UpgradeOffer {
  static constexpr size_t kSize = 16;
  int32_t status = 0;        // 0, or the errno that kept the listening side from offering
  sockaddr_in rendezvous{};  // where to connect the SAN channel (only meaningful when status == 0)
};

struct UpgradeResult {
  static constexpr size_t kSize = 8;
  int32_t status = 0;
};

void EncodeUpgradeHello(const UpgradeHello& m, std::byte out[UpgradeHello::kSize]);
Result<UpgradeHello> DecodeUpgradeHello(const std::byte* in, size_t length);
void EncodeUpgradeOffer(const UpgradeOffer& m, std::byte out[UpgradeOffer::kSize]);
Result<UpgradeOffer> DecodeUpgradeOffer(const std::byte* in, size_t length);
void EncodeUpgradeResult(const UpgradeResult& m, std::byte out[UpgradeResult::kSize]);
Result<UpgradeResult> DecodeUpgradeResult(const std::byte* in, size_t length);

// Whether the two ends are in the same network namespace of the same host (shm can connect them).
bool SameHost(const UpgradeHello& a, const UpgradeHello& b);

}  // namespace san::proto
