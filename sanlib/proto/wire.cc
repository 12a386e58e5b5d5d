#include "sanlib/proto/wire.h"

#include <cstring>

#include "sanlib/common/inet_address.h"

namespace san::proto {
namespace {

void Put32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
void Put16(std::byte* p, uint16_t v) {
  for (int i = 0; i < 2; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
uint32_t Get32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
void Put64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
uint64_t Get64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}
uint16_t Get16(const std::byte* p) {
  return static_cast<uint16_t>(static_cast<uint16_t>(p[0]) | (static_cast<uint16_t>(p[1]) << 8));
}

}  // namespace

uint32_t EncodeImm(const Header& h) {
  return (static_cast<uint32_t>(h.type) << 28) | (static_cast<uint32_t>(h.credits) << 20) |
         (kWireVersion << 16) | h.seq;
}

Result<Header> DecodeImm(uint32_t imm) {
  uint32_t type = imm >> 28;
  if (type < static_cast<uint32_t>(PacketType::kData) ||
      type > static_cast<uint32_t>(PacketType::kMoved)) {
    return Status(EPROTO, "packet type check");
  }
  if (((imm >> 16) & 0xf) != kWireVersion) return Status(EPROTO, "packet version check");
  Header h;
  h.type = static_cast<PacketType>(type);
  h.credits = static_cast<uint8_t>((imm >> 20) & 0xff);
  h.seq = static_cast<uint16_t>(imm & 0xffff);
  return h;
}

size_t WakeupBody::size() const {
  return kSize + ((flags & kWakeupFromTcp) ? 8 : 0) + ((flags & kWakeupNamesSource) ? 8 : 0);
}

void EncodeWakeup(const WakeupBody& body, std::byte* out) {
  Put32(out, WakeupBody::kMagic);
  Put16(out + 4, body.window);
  Put16(out + 6, body.ack_reserve);
  Put32(out + 8, body.buffer_size);
  Put32(out + 12, body.flags);
  size_t at = WakeupBody::kSize;
  if (body.flags & kWakeupFromTcp) {
    Put64(out + at, body.tcp_bytes);
    at += 8;
  }
  if (body.flags & kWakeupNamesSource) {
    Put16(out + at, body.source_port);
    Put16(out + at + 2, 0);
    Put32(out + at + 4, 0);
  }
}

Result<WakeupBody> DecodeWakeup(const std::byte* in, size_t length) {
  if (length < WakeupBody::kSize || length > WakeupBody::kMaxSize || length % 8 != 0) {
    return Status(EPROTO, "wakeup size check");
  }
  if (Get32(in) != WakeupBody::kMagic) return Status(EPROTO, "wakeup magic check");
  WakeupBody b;
  b.window = Get16(in + 4);
  b.ack_reserve = Get16(in + 6);
  b.buffer_size = Get32(in + 8);
  b.flags = Get32(in + 12);
  if (b.window == 0 || b.window > 255 || b.buffer_size < 64 ||
      (b.flags & ~kWakeupKnownFlags) != 0 || b.size() != length) {
    return Status(EPROTO, "wakeup field check");
  }
  size_t at = WakeupBody::kSize;
  if (b.flags & kWakeupFromTcp) {
    b.tcp_bytes = Get64(in + at);
    at += 8;
  }
  if (b.flags & kWakeupNamesSource) {
    b.source_port = Get16(in + at);
    if (b.source_port == 0 || Get16(in + at + 2) != 0 || Get32(in + at + 4) != 0) {
      return Status(EPROTO, "wakeup source check");
    }
  }
  return b;
}

void EncodeAdvert(const AdvertBody& body, std::byte out[AdvertBody::kSize]) {
  Put32(out, AdvertBody::kMagic);
  Put32(out + 4, body.generation);
  Put64(out + 8, body.stream_offset);
  Put64(out + 16, body.addr);
  Put32(out + 24, body.length);
  Put32(out + 28, 0);
}

Result<AdvertBody> DecodeAdvert(const std::byte* in, size_t length) {
  if (length != AdvertBody::kSize) return Status(EPROTO, "advert size check");
  if (Get32(in) != AdvertBody::kMagic) return Status(EPROTO, "advert magic check");
  AdvertBody b;
  b.generation = Get32(in + 4);
  b.stream_offset = Get64(in + 8);
  b.addr = Get64(in + 16);
  b.length = Get32(in + 24);
  if (b.length == 0 || Get32(in + 28) != 0) return Status(EPROTO, "advert field check");
  return b;
}

void EncodePut(const PutBody& body, std::byte out[PutBody::kSize]) {
  Put32(out, PutBody::kMagic);
  Put32(out + 4, body.generation);
  Put32(out + 8, body.length);
  Put32(out + 12, 0);
}

Result<PutBody> DecodePut(const std::byte* in, size_t length) {
  if (length != PutBody::kSize) return Status(EPROTO, "put size check");
  if (Get32(in) != PutBody::kMagic) return Status(EPROTO, "put magic check");
  PutBody b;
  b.generation = Get32(in + 4);
  b.length = Get32(in + 8);
  if (Get32(in + 12) != 0) return Status(EPROTO, "put field check");
  return b;
}

void EncodeMoveHeader(const MoveHeader& header, std::byte out[MoveHeader::kSize]) {
  Put32(out, MoveHeader::kMagic);
  Put32(out + 4, MoveHeader::kVersion);
  Put64(out + 8, header.returned);
}

Result<MoveHeader> DecodeMoveHeader(const std::byte* in, size_t length) {
  if (length != MoveHeader::kSize) return Status(EPROTO, "move header size check");
  if (Get32(in) != MoveHeader::kMagic) return Status(EPROTO, "move header magic check");
  if (Get32(in + 4) != MoveHeader::kVersion) return Status(EPROTO, "move header version check");
  MoveHeader h;
  h.returned = Get64(in + 8);
  return h;
}

sockaddr_storage CanonicalAddress(const sockaddr* addr, socklen_t len) {
  const std::optional<InetAddress> a = ReduceInet(addr, len);
  return a ? ToSockaddr(*a) : sockaddr_storage{};
}

bool SameAddress(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port && !memcmp(&x.sin6_addr, &y.sin6_addr, 16);
  }
  return false;
}

namespace {

// Port (network order) and address bytes of a canonical sockaddr.
size_t AddressBytes(const sockaddr_storage& a, const uint8_t** bytes, uint16_t* port) {
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    *bytes = reinterpret_cast<const uint8_t*>(&in.sin_addr);
    *port = in.sin_port;
    return 4;
  }
  const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
  *bytes = in6.sin6_addr.s6_addr;
  *port = in6.sin6_port;
  return 16;
}

void FillAddress(int family, const uint8_t* bytes, uint16_t port, sockaddr_storage* out) {
  *out = sockaddr_storage{};
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(out);
    in->sin_family = AF_INET;
    in->sin_port = port;
    memcpy(&in->sin_addr, bytes, 4);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = port;
    memcpy(&in6->sin6_addr, bytes, 16);
  }
}

}  // namespace

fabric::ConnectData EncodeConnectRequest(const FourTuple& tuple) {
  fabric::ConnectData d;
  // Both addresses must be canonical and of one family; anything else would be encoded as bytes
  // of the wrong address, so it becomes the empty request, which every decoder rejects.
  const int family = tuple.client.ss_family;
  if ((family != AF_INET && family != AF_INET6) || tuple.server.ss_family != family) return d;
  const uint8_t* client_bytes;
  const uint8_t* server_bytes;
  uint16_t client_port, server_port;
  size_t n = AddressBytes(tuple.client, &client_bytes, &client_port);
  AddressBytes(tuple.server, &server_bytes, &server_port);
  d.bytes[0] = 1;
  d.bytes[1] = n == 4 ? 4 : 6;
  memcpy(&d.bytes[2], &client_port, 2);
  memcpy(&d.bytes[4], &server_port, 2);
  memcpy(&d.bytes[6], client_bytes, n);
  memcpy(&d.bytes[6 + n], server_bytes, n);
  d.length = static_cast<uint8_t>(6 + 2 * n);
  return d;
}

Result<FourTuple> DecodeConnectRequest(const fabric::ConnectData& data) {
  if (data.length < 6 || data.bytes[0] != 1) return Status(EPROTO, "connect request version");
  const size_t n = data.bytes[1] == 4 ? 4 : data.bytes[1] == 6 ? 16 : 0;
  if (n == 0 || data.length != 6 + 2 * n) return Status(EPROTO, "connect request size");
  const int family = n == 4 ? AF_INET : AF_INET6;
  uint16_t client_port, server_port;
  memcpy(&client_port, &data.bytes[2], 2);
  memcpy(&server_port, &data.bytes[4], 2);
  FourTuple t;
  FillAddress(family, &data.bytes[6], client_port, &t.client);
  FillAddress(family, &data.bytes[6 + n], server_port, &t.server);
  return t;
}

}  // namespace san::proto
