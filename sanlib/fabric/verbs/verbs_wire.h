// The verbs rendezvous's private data: the bytes librdmacm carries in the connection request
// (RDMA_PS_TCP over IB CM: at most 56 bytes of user data in a REQ, zero-padded by the CM, so the
// receiver cannot trust the length librdmacm reports and the blob carries its own).
//
//   offset 0  magic    u16 big-endian  0x5356 ("SV")
//          2  version  u8              kVersion
//          4  length   u8              ConnectData::length (<= ConnectData::kMax)
//          4  bytes    u8[48]          ConnectData::bytes (only `length` of them meaningful)
//
// A reject carries no data: the client reports ECONNREFUSED for every reject (as shm does).
// Thread-safety: pure functions. The peer is never trusted: DecodeRequest checks every field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "sanlib/common/status.h"
#include "sanlib/fabric/provider.h"

namespace san::fabric::verbs {

struct RequestBlob {
  static constexpr uint16_t kMagic = 0x5356;
  static constexpr uint8_t kVersion = 1;
  static constexpr size_t kSize = 4 + ConnectData::kMax;
  static constexpr size_t kMaxPrivateData = 56;  // IB CM REQ limit for rdma_cm (RDMA_PS_TCP)
  uint8_t bytes[kSize] = {};
};
static_assert(RequestBlob::kSize <= RequestBlob::kMaxPrivateData, "must fit an IB CM REQ");

inline RequestBlob EncodeRequest(const ConnectData& data) {
  RequestBlob blob;
  blob.bytes[0] = RequestBlob::kMagic >> 8;
  blob.bytes[1] = RequestBlob::kMagic & 0xff;
  blob.bytes[2] = RequestBlob::kVersion;
  const uint8_t length = data.length <= ConnectData::kMax ? data.length : ConnectData::kMax;
  blob.bytes[3] = length;
  std::memcpy(blob.bytes + 4, data.bytes, length);
  return blob;
}

// `bytes`/`length` as librdmacm delivered them (possibly padded, possibly short or absent).
inline Result<ConnectData> DecodeRequest(const void* bytes, size_t length) {
  if (bytes == nullptr || length < 4) return Status(EPROTO, "verbs request: no private data");
  const auto* b = static_cast<const uint8_t*>(bytes);
  if (((b[0] << 8) | b[1]) != RequestBlob::kMagic) return Status(EPROTO, "verbs request: magic");
  if (b[2] != RequestBlob::kVersion) return Status(EPROTO, "verbs request: version");
  if (b[3] > ConnectData::kMax || size_t{4} + b[3] > length) {
    return Status(EPROTO, "verbs request: length");
  }
  ConnectData data;
  data.length = b[3];
  std::memcpy(data.bytes, b + 4, data.length);
  return data;
}

}  // namespace san::fabric::verbs
