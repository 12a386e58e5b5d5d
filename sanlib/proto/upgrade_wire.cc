#include "sanlib/proto/upgrade_wire.h"

#include <cstring>

namespace san::proto {
namespace {

constexpr char kHelloMagic[7] = {'S', 'A', 'N', 'U', 'P', 'G', '\0'};
constexpr char kOfferMagic[4] = {'S', 'A', 'N', 'O'};
constexpr char kResultMagic[4] = {'S', 'A', 'N', 'R'};

template <typename T>
void PutLe(std::byte* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i)
    p[i] = static_cast<std::byte>(static_cast<uint64_t>(v) >> (8 * i));
}
template <typename T>
T GetLe(const std::byte* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace

void EncodeUpgradeHello(const UpgradeHello& m, std::byte out[UpgradeHello::kSize]) {
  memcpy(out, kHelloMagic, sizeof kHelloMagic);
  out[7] = static_cast<std::byte>(UpgradeHello::kVersion);
  PutLe<uint32_t>(out + 8, m.flags);
  PutLe<uint32_t>(out + 12, 0);
  PutLe<uint64_t>(out + 16, m.netns_dev);
  PutLe<uint64_t>(out + 24, m.netns_inode);
  PutLe<uint64_t>(out + 32, m.boot_id);
}

Result<UpgradeHello> DecodeUpgradeHello(const std::byte* in, size_t length) {
  if (length != UpgradeHello::kSize || memcmp(in, kHelloMagic, sizeof kHelloMagic) != 0) {
    return Status(EPROTO, "upgrade hello magic check");
  }
  if (static_cast<uint8_t>(in[7]) != UpgradeHello::kVersion) {
    return Status(EPROTO, "upgrade hello version check");
  }
  if (GetLe<uint32_t>(in + 12) != 0) return Status(EPROTO, "upgrade hello reserved check");
  UpgradeHello m;
  m.flags = GetLe<uint32_t>(in + 8);
  m.netns_dev = GetLe<uint64_t>(in + 16);
  m.netns_inode = GetLe<uint64_t>(in + 24);
  m.boot_id = GetLe<uint64_t>(in + 32);
  return m;
}

void EncodeUpgradeOffer(const UpgradeOffer& m, std::byte out[UpgradeOffer::kSize]) {
  memcpy(out, kOfferMagic, sizeof kOfferMagic);
  PutLe<uint32_t>(out + 4, static_cast<uint32_t>(m.status));
  memcpy(out + 8, &m.rendezvous.sin_addr.s_addr, 4);  // already network order
  memcpy(out + 12, &m.rendezvous.sin_port, 2);
  PutLe<uint16_t>(out + 14, 0);
}

Result<UpgradeOffer> DecodeUpgradeOffer(const std::byte* in, size_t length) {
  if (length != UpgradeOffer::kSize || memcmp(in, kOfferMagic, sizeof kOfferMagic) != 0) {
    return Status(EPROTO, "upgrade offer magic check");
  }
  if (GetLe<uint16_t>(in + 14) != 0) return Status(EPROTO, "upgrade offer reserved check");
  UpgradeOffer m;
  m.status = static_cast<int32_t>(GetLe<uint32_t>(in + 4));
  if (m.status < 0) return Status(EPROTO, "upgrade offer status check");
  m.rendezvous.sin_family = AF_INET;
  memcpy(&m.rendezvous.sin_addr.s_addr, in + 8, 4);
  memcpy(&m.rendezvous.sin_port, in + 12, 2);
  if (m.status == 0 && m.rendezvous.sin_port == 0)
    return Status(EPROTO, "upgrade offer port check");
  return m;
}

void EncodeUpgradeResult(const UpgradeResult& m, std::byte out[UpgradeResult::kSize]) {
  memcpy(out, kResultMagic, sizeof kResultMagic);
  PutLe<uint32_t>(out + 4, static_cast<uint32_t>(m.status));
}

Result<UpgradeResult> DecodeUpgradeResult(const std::byte* in, size_t length) {
  if (length != UpgradeResult::kSize || memcmp(in, kResultMagic, sizeof kResultMagic) != 0) {
    return Status(EPROTO, "upgrade result magic check");
  }
  UpgradeResult m;
  m.status = static_cast<int32_t>(GetLe<uint32_t>(in + 4));
  if (m.status < 0) return Status(EPROTO, "upgrade result status check");
  return m;
}

bool SameHost(const UpgradeHello& a, const UpgradeHello& b) {
  return a.boot_id == b.boot_id && a.netns_dev == b.netns_dev && a.netns_inode == b.netns_inode;
}

}  // namespace san::proto
