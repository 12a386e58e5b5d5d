// Wire format (proto/wire.h): the immediate, the WAKEUP body and the connect request. Round trips,
// every rejection the decoders promise, and a randomized check that decoding arbitrary input never
// misbehaves and that whatever is accepted re-encodes to the very same bytes.
#include "sanlib/proto/wire.h"

#include <arpa/inet.h>

#include <cstring>
#include <random>

#include <gtest/gtest.h>

namespace san::proto {
namespace {

constexpr PacketType kAllTypes[] = {PacketType::kData, PacketType::kAck,    PacketType::kWakeup,
                                    PacketType::kFin,  PacketType::kFinAck, PacketType::kMove,
                                    PacketType::kMoved};

sockaddr_storage V4(const char* ip, uint16_t port) {
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip, &in->sin_addr), 1) << ip;
  return ss;
}

sockaddr_storage V6(const char* ip, uint16_t port) {
  sockaddr_storage ss{};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1) << ip;
  return ss;
}

const sockaddr* Sa(const sockaddr_storage& ss) { return reinterpret_cast<const sockaddr*>(&ss); }

// ---- immediate ---------------------------------------------------------------------------------

TEST(proto_wire, ImmLayoutIsTheDocumentedOne) {
  Header h;
  h.type = PacketType::kFin;
  h.credits = 0xab;
  h.seq = 0x1234;
  EXPECT_EQ(EncodeImm(h), (4u << 28) | (0xabu << 20) | (kWireVersion << 16) | 0x1234u);
}

TEST(proto_wire, ImmRoundTripsEveryTypeCreditAndSeqCorner) {
  const uint8_t credits[] = {0, 1, 16, 127, 128, 254, 255};
  const uint16_t seqs[] = {0, 1, 0x7fff, 0x8000, 0xfffe, 0xffff};
  for (PacketType type : kAllTypes) {
    for (uint8_t c : credits) {
      for (uint16_t s : seqs) {
        Header h{type, c, s};
        const uint32_t imm = EncodeImm(h);
        Result<Header> d = DecodeImm(imm);
        ASSERT_TRUE(d.ok()) << std::hex << imm;
        EXPECT_EQ(d->type, type);
        EXPECT_EQ(d->credits, c);
        EXPECT_EQ(d->seq, s);
        EXPECT_EQ(EncodeImm(d.value()), imm);
      }
    }
  }
}

TEST(proto_wire, ImmRejectsInvalidTypes) {
  for (uint32_t type : {0u, 10u, 11u, 12u, 13u, 14u, 15u}) {
    const uint32_t imm = (type << 28) | (kWireVersion << 16) | 7;
    Result<Header> d = DecodeImm(imm);
    EXPECT_FALSE(d.ok()) << "type " << type;
    EXPECT_EQ(d.status().code(), EPROTO) << "type " << type;
  }
}

// ---- move header ------------------------------------------------------------------------------

TEST(proto_wire, MoveHeaderLayoutAndRoundTrip) {
  MoveHeader h;
  h.returned = 0x0102030405060708ull;
  std::byte out[MoveHeader::kSize];
  EncodeMoveHeader(h, out);
  const uint8_t expect[MoveHeader::kSize] = {0x4d, 0x4e, 0x41, 0x53, 1, 0, 0, 0,
                                             8,    7,    6,    5,    4, 3, 2, 1};
  EXPECT_EQ(memcmp(out, expect, sizeof expect), 0);
  Result<MoveHeader> d = DecodeMoveHeader(out, sizeof out);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->returned, h.returned);
}

TEST(proto_wire, MoveHeaderRejectsWrongSizeMagicAndVersion) {
  std::byte good[MoveHeader::kSize];
  EncodeMoveHeader(MoveHeader{}, good);
  EXPECT_EQ(DecodeMoveHeader(good, MoveHeader::kSize - 1).status().code(), EPROTO);
  std::byte bad[MoveHeader::kSize];
  memcpy(bad, good, sizeof bad);
  bad[0] = std::byte{0};
  EXPECT_EQ(DecodeMoveHeader(bad, sizeof bad).status().code(), EPROTO);
  memcpy(bad, good, sizeof bad);
  bad[4] = std::byte{2};
  EXPECT_EQ(DecodeMoveHeader(bad, sizeof bad).status().code(), EPROTO);
}

TEST(proto_wire, ImmRejectsWrongVersion) {
  for (uint32_t version = 0; version < 16; ++version) {
    if (version == kWireVersion) continue;
    const uint32_t imm = (1u << 28) | (version << 16) | 1;
    Result<Header> d = DecodeImm(imm);
    EXPECT_FALSE(d.ok()) << "version " << version;
    EXPECT_EQ(d.status().code(), EPROTO);
  }
}

// ---- WAKEUP body -------------------------------------------------------------------------------

TEST(proto_wire, WakeupRoundTripAndLittleEndianLayout) {
  WakeupBody b;
  b.window = 32;
  b.ack_reserve = 3;
  b.buffer_size = 0x00018000;  // 96 KiB
  std::byte out[WakeupBody::kSize];
  EncodeWakeup(b, out);
  const uint8_t expect[WakeupBody::kSize] = {0x57, 0x4e, 0x41, 0x53,  // "SANW" little-endian
                                             32,   0,    3,    0,     // window, ack_reserve
                                             0x00, 0x80, 0x01, 0x00,  // buffer_size
                                             0,    0,    0,    0};    // flags
  EXPECT_EQ(0, memcmp(out, expect, sizeof(expect)));
  Result<WakeupBody> d = DecodeWakeup(out, sizeof(out));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->window, 32);
  EXPECT_EQ(d->ack_reserve, 3);
  EXPECT_EQ(d->buffer_size, 0x18000u);
  EXPECT_EQ(d->flags, 0u);
}

TEST(proto_wire, WakeupCarriesTheCanWriteFlag) {
  WakeupBody b;
  b.window = 32;
  b.buffer_size = 4096;
  b.flags = kWakeupCanWrite;
  std::byte out[WakeupBody::kSize];
  EncodeWakeup(b, out);
  EXPECT_EQ(out[12], std::byte{1});
  Result<WakeupBody> d = DecodeWakeup(out, sizeof(out));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->flags, kWakeupCanWrite);
}

// A connection that began on kernel TCP (socket/late_upgrade.h): 24 bytes, the count last.
TEST(proto_wire, WakeupFromTcpCarriesTheByteCount) {
  WakeupBody b;
  b.window = 32;
  b.buffer_size = 4096;
  b.flags = kWakeupFromTcp;
  b.tcp_bytes = 0x0102030405060708ull;
  ASSERT_EQ(b.size(), WakeupBody::kSizeFromTcp);
  std::byte out[WakeupBody::kSizeFromTcp];
  EncodeWakeup(b, out);
  EXPECT_EQ(out[16], std::byte{0x08});
  EXPECT_EQ(out[23], std::byte{0x01});
  Result<WakeupBody> d = DecodeWakeup(out, sizeof(out));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->tcp_bytes, b.tcp_bytes);
  // The flag and the length must agree, either way.
  EXPECT_FALSE(DecodeWakeup(out, WakeupBody::kSize).ok());
  b.flags = 0;
  EncodeWakeup(b, out);
  EXPECT_FALSE(DecodeWakeup(out, WakeupBody::kSizeFromTcp).ok());
  EXPECT_FALSE(DecodeWakeup(out, 20).ok());
}

// A client that filed its channel before connect() chose its port names it: 8 more bytes, after
// tcp_bytes when both are present; port 0 and non-zero padding are malformed.
TEST(proto_wire, WakeupNamesTheSourcePort) {
  WakeupBody b;
  b.window = 32;
  b.buffer_size = 4096;
  b.flags = kWakeupNamesSource;
  b.source_port = 0xa1b2;
  ASSERT_EQ(b.size(), 24u);
  std::byte out[WakeupBody::kMaxSize];
  EncodeWakeup(b, out);
  EXPECT_EQ(out[16], std::byte{0xb2});
  EXPECT_EQ(out[17], std::byte{0xa1});
  Result<WakeupBody> d = DecodeWakeup(out, 24);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->source_port, 0xa1b2);
  EXPECT_EQ(d->tcp_bytes, 0u);
  EXPECT_FALSE(DecodeWakeup(out, WakeupBody::kSize).ok());
  EXPECT_FALSE(DecodeWakeup(out, 32).ok());
  out[20] = std::byte{1};  // padding
  EXPECT_FALSE(DecodeWakeup(out, 24).ok());
  b.source_port = 0;
  EncodeWakeup(b, out);
  EXPECT_FALSE(DecodeWakeup(out, 24).ok());

  b.flags = kWakeupNamesSource | kWakeupFromTcp;
  b.source_port = 40001;
  b.tcp_bytes = 77;
  ASSERT_EQ(b.size(), WakeupBody::kMaxSize);
  EncodeWakeup(b, out);
  d = DecodeWakeup(out, WakeupBody::kMaxSize);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->tcp_bytes, 77u);
  EXPECT_EQ(d->source_port, 40001);
  EXPECT_FALSE(DecodeWakeup(out, 24).ok());
  EXPECT_FALSE(DecodeWakeup(out, 40).ok());
}

TEST(proto_wire, SingleCopyTypesAreValid) {
  for (PacketType t : {PacketType::kAdvert, PacketType::kPut}) {
    Header h;
    h.type = t;
    h.credits = 3;
    h.seq = 9;
    Result<Header> d = DecodeImm(EncodeImm(h));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->type, t);
  }
  EXPECT_EQ(EncodeImm(Header{PacketType::kAdvert, 0, 0}) >> 28, 6u);
  EXPECT_EQ(EncodeImm(Header{PacketType::kPut, 0, 0}) >> 28, 7u);
}

// ---- ADVERT and PUT bodies (single copy) ------------------------------------------------------

TEST(proto_wire, AdvertRoundTripAndLittleEndianLayout) {
  AdvertBody b;
  b.generation = 0x01020304;
  b.stream_offset = 0x1122334455667788ull;
  b.addr = 0x00007f0012345000ull;
  b.length = 0x00100000;
  std::byte out[AdvertBody::kSize];
  EncodeAdvert(b, out);
  const uint8_t expect[AdvertBody::kSize] = {
      0x41, 0x4e, 0x41, 0x53,                          // "SANA" little-endian
      0x04, 0x03, 0x02, 0x01,                          // generation
      0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,  // stream offset
      0x00, 0x50, 0x34, 0x12, 0x00, 0x7f, 0x00, 0x00,  // addr
      0x00, 0x00, 0x10, 0x00,                          // length
      0,    0,    0,    0};                            // reserved
  EXPECT_EQ(0, memcmp(out, expect, sizeof(expect)));
  Result<AdvertBody> d = DecodeAdvert(out, sizeof(out));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->generation, b.generation);
  EXPECT_EQ(d->stream_offset, b.stream_offset);
  EXPECT_EQ(d->addr, b.addr);
  EXPECT_EQ(d->length, b.length);
}

TEST(proto_wire, AdvertRejectsBadInput) {
  AdvertBody b;
  b.length = 4096;
  std::byte out[AdvertBody::kSize + 1] = {};
  EncodeAdvert(b, out);
  EXPECT_EQ(DecodeAdvert(out, AdvertBody::kSize - 1).status().code(), EPROTO);
  EXPECT_EQ(DecodeAdvert(out, AdvertBody::kSize + 1).status().code(), EPROTO);
  std::byte bad[AdvertBody::kSize];
  memcpy(bad, out, sizeof bad);
  bad[0] = std::byte{0};  // magic
  EXPECT_EQ(DecodeAdvert(bad, sizeof bad).status().code(), EPROTO);
  memcpy(bad, out, sizeof bad);
  bad[31] = std::byte{1};  // reserved
  EXPECT_EQ(DecodeAdvert(bad, sizeof bad).status().code(), EPROTO);
  b.length = 0;  // an empty window
  EncodeAdvert(b, bad);
  EXPECT_EQ(DecodeAdvert(bad, sizeof bad).status().code(), EPROTO);
}

TEST(proto_wire, PutRoundTripAndLittleEndianLayout) {
  PutBody b;
  b.generation = 7;
  b.length = 0x00010000;
  std::byte out[PutBody::kSize];
  EncodePut(b, out);
  const uint8_t expect[PutBody::kSize] = {0x50, 0x4e, 0x41, 0x53,  // "SANP" little-endian
                                          7,    0,    0,    0,     // generation
                                          0x00, 0x00, 0x01, 0x00,  // length
                                          0,    0,    0,    0};    // reserved
  EXPECT_EQ(0, memcmp(out, expect, sizeof(expect)));
  Result<PutBody> d = DecodePut(out, sizeof(out));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->generation, 7u);
  EXPECT_EQ(d->length, 0x10000u);
  b.length = 0;  // a decline is valid
  EncodePut(b, out);
  EXPECT_TRUE(DecodePut(out, sizeof(out)).ok());
}

TEST(proto_wire, PutRejectsBadInput) {
  std::byte out[PutBody::kSize + 1] = {};
  EncodePut(PutBody{}, out);
  EXPECT_EQ(DecodePut(out, PutBody::kSize - 1).status().code(), EPROTO);
  EXPECT_EQ(DecodePut(out, PutBody::kSize + 1).status().code(), EPROTO);
  std::byte bad[PutBody::kSize];
  memcpy(bad, out, sizeof bad);
  bad[3] = std::byte{0};
  EXPECT_EQ(DecodePut(bad, sizeof bad).status().code(), EPROTO);
  memcpy(bad, out, sizeof bad);
  bad[12] = std::byte{1};
  EXPECT_EQ(DecodePut(bad, sizeof bad).status().code(), EPROTO);
}

// Arbitrary bytes: the single-copy decoders reject with EPROTO or accept something that encodes
// back to exactly the input (seeded, so GCC builds replay the same corpus every run).
TEST(proto_wire, SingleCopyBodiesRandomInputs) {
  std::mt19937_64 rng(0xadbe);
  int accepted = 0;
  for (int i = 0; i < 100000; ++i) {
    std::byte in[AdvertBody::kSize + 4];
    for (auto& b : in) b = static_cast<std::byte>(rng());
    const bool advert = i % 2 == 0;
    size_t len = rng() % sizeof(in);
    if (i % 4 < 2) {  // near-valid
      len = advert ? AdvertBody::kSize : PutBody::kSize;
      const uint8_t magic[4] = {static_cast<uint8_t>(advert ? 0x41 : 0x50), 0x4e, 0x41, 0x53};
      memcpy(in, magic, 4);
      if (rng() % 2) memset(in + len - 4, 0, 4);
    }
    std::byte again[AdvertBody::kSize];
    if (advert) {
      Result<AdvertBody> d = DecodeAdvert(in, len);
      if (!d.ok()) {
        ASSERT_EQ(d.status().code(), EPROTO);
        continue;
      }
      EncodeAdvert(d.value(), again);
    } else {
      Result<PutBody> d = DecodePut(in, len);
      if (!d.ok()) {
        ASSERT_EQ(d.status().code(), EPROTO);
        continue;
      }
      EncodePut(d.value(), again);
    }
    ++accepted;
    ASSERT_EQ(0, memcmp(again, in, len));
  }
  EXPECT_GT(accepted, 1000);
}

TEST(proto_wire, MoveHeaderRandomInputIsRejectedOrReencodesExactly) {
  std::mt19937 rng(20261123);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::byte in[MoveHeader::kSize + 4];
    for (std::byte& b : in) b = static_cast<std::byte>(rng());
    size_t len = rng() % (sizeof in + 1);
    if (rng() % 2) {  // a plausible one, so that acceptance is exercised
      len = MoveHeader::kSize;
      const uint8_t prefix[8] = {0x4d, 0x4e, 0x41, 0x53, static_cast<uint8_t>(rng() % 4 ? 1 : 2),
                                 0,    0,    0};
      memcpy(in, prefix, sizeof prefix);
    }
    Result<MoveHeader> d = DecodeMoveHeader(in, len);
    if (!d.ok()) {
      ASSERT_EQ(d.status().code(), EPROTO);
      continue;
    }
    std::byte again[MoveHeader::kSize];
    EncodeMoveHeader(d.value(), again);
    ASSERT_EQ(len, MoveHeader::kSize);
    ASSERT_EQ(0, memcmp(again, in, len));
    ++accepted;
  }
  EXPECT_GT(accepted, 1000);
}

TEST(proto_wire, WakeupAcceptsTheFieldLimits) {
  for (uint16_t window : {1, 255}) {
    for (uint32_t size : {64u, 0xffffffffu}) {
      WakeupBody b;
      b.window = window;
      b.buffer_size = size;
      b.ack_reserve = 0xffff;
      std::byte out[WakeupBody::kSize];
      EncodeWakeup(b, out);
      Result<WakeupBody> d = DecodeWakeup(out, sizeof(out));
      ASSERT_TRUE(d.ok()) << window << " " << size;
      EXPECT_EQ(d->window, window);
      EXPECT_EQ(d->buffer_size, size);
    }
  }
}

TEST(proto_wire, WakeupRejectsBadSize) {
  WakeupBody b;
  b.window = 32;
  b.buffer_size = 4096;
  std::byte out[WakeupBody::kSize + 1] = {};
  EncodeWakeup(b, out);
  for (size_t len : {size_t{0}, size_t{1}, WakeupBody::kSize - 1, WakeupBody::kSize + 1}) {
    Result<WakeupBody> d = DecodeWakeup(out, len);
    EXPECT_FALSE(d.ok()) << len;
    EXPECT_EQ(d.status().code(), EPROTO);
  }
}

TEST(proto_wire, WakeupRejectsBadMagic) {
  WakeupBody b;
  b.window = 32;
  b.buffer_size = 4096;
  for (int byte = 0; byte < 4; ++byte) {
    std::byte out[WakeupBody::kSize];
    EncodeWakeup(b, out);
    out[byte] ^= std::byte{0x20};
    EXPECT_EQ(DecodeWakeup(out, sizeof(out)).status().code(), EPROTO) << byte;
  }
}

TEST(proto_wire, WakeupRejectsBadFields) {
  struct Case {
    uint16_t window;
    uint32_t buffer_size;
    uint32_t flags;
  };
  const Case cases[] = {
      {0, 4096, 0},    // no window at all
      {256, 4096, 0},  // does not fit the 8-bit credit field
      {0xffff, 4096, 0},
      {32, 63, 0},  // buffers too small to be useful
      {32, 0, 0},
      {32, 4096, 8},  // reserved flags (all but the three kWakeup* ones) must be 0
      {32, 4096, 0x80000000u},
  };
  for (const Case& c : cases) {
    WakeupBody b;
    b.window = c.window;
    b.buffer_size = c.buffer_size;
    b.flags = c.flags;
    std::byte out[WakeupBody::kSize];
    EncodeWakeup(b, out);
    Result<WakeupBody> d = DecodeWakeup(out, sizeof(out));
    EXPECT_EQ(d.status().code(), EPROTO) << c.window << " " << c.buffer_size << " " << c.flags;
  }
}

// ---- connect request ---------------------------------------------------------------------------

TEST(proto_wire, ConnectRequestV4RoundTripAndLayout) {
  FourTuple t;
  t.client = V4("10.1.2.3", 40000);
  t.server = V4("192.168.7.9", 21);
  fabric::ConnectData d = EncodeConnectRequest(t);
  ASSERT_EQ(d.length, 14);
  const uint8_t expect[14] = {1,   4,   0x9c, 0x40,
                              0,   21,             // version, family, ports (network order)
                              10,  1,   2,    3,   // client address
                              192, 168, 7,    9};  // server address
  EXPECT_EQ(0, memcmp(d.bytes, expect, sizeof(expect)));
  Result<FourTuple> back = DecodeConnectRequest(d);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(SameAddress(back->client, t.client));
  EXPECT_TRUE(SameAddress(back->server, t.server));
  EXPECT_FALSE(SameAddress(back->client, back->server));
}

TEST(proto_wire, ConnectRequestV6RoundTrip) {
  FourTuple t;
  t.client = V6("fe80::1:2:3:4", 65535);
  t.server = V6("2001:db8::42", 1);
  fabric::ConnectData d = EncodeConnectRequest(t);
  ASSERT_EQ(d.length, 38);
  EXPECT_EQ(d.bytes[0], 1);
  EXPECT_EQ(d.bytes[1], 6);
  Result<FourTuple> back = DecodeConnectRequest(d);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->client.ss_family, AF_INET6);
  EXPECT_TRUE(SameAddress(back->client, t.client));
  EXPECT_TRUE(SameAddress(back->server, t.server));
  const auto& s6 = reinterpret_cast<const sockaddr_in6&>(back->server);
  EXPECT_EQ(ntohs(s6.sin6_port), 1);
}

TEST(proto_wire, ConnectRequestRejectsMalformed) {
  FourTuple t4{V4("127.0.0.1", 1000), V4("127.0.0.1", 2000)};
  FourTuple t6{V6("::1", 1000), V6("::1", 2000)};
  const fabric::ConnectData good4 = EncodeConnectRequest(t4);
  const fabric::ConnectData good6 = EncodeConnectRequest(t6);
  ASSERT_TRUE(DecodeConnectRequest(good4).ok());
  ASSERT_TRUE(DecodeConnectRequest(good6).ok());

  auto expect_reject = [](fabric::ConnectData d, const char* what) {
    Result<FourTuple> r = DecodeConnectRequest(d);
    EXPECT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), EPROTO) << what;
  };
  for (uint8_t len : {0, 1, 5, 6, 13, 15, 37, 38, 48, 255}) {
    fabric::ConnectData d = good4;
    d.length = len;
    if (len != 14) expect_reject(d, "v4 length");
  }
  for (uint8_t len : {0, 6, 14, 37, 39, 48, 255}) {
    fabric::ConnectData d = good6;
    d.length = len;
    expect_reject(d, "v6 length");
  }
  for (uint8_t version : {0, 2, 255}) {
    fabric::ConnectData d = good4;
    d.bytes[0] = version;
    expect_reject(d, "version");
  }
  for (uint8_t family : {0, 2, 5, 10, AF_INET, AF_INET6}) {
    if (family == 4 || family == 6) continue;
    fabric::ConnectData d = good4;
    d.bytes[1] = family;
    expect_reject(d, "family");
  }
  // The family byte decides the length: a v4 body labelled v6 and the reverse are both rejected.
  fabric::ConnectData d = good4;
  d.bytes[1] = 6;
  expect_reject(d, "v4 body labelled 6");
  d = good6;
  d.bytes[1] = 4;
  expect_reject(d, "v6 body labelled 4");
}

TEST(proto_wire, ConnectRequestWithMismatchedFamiliesIsNotSilentlyWrong) {
  // The caller canonicalises both addresses first; if it did not, the encoder must not invent an
  // address: the request is one the decoder rejects.
  FourTuple t{V4("10.0.0.1", 1), V6("2001:db8::1", 2)};
  EXPECT_FALSE(DecodeConnectRequest(EncodeConnectRequest(t)).ok());
  FourTuple u{V6("2001:db8::1", 2), V4("10.0.0.1", 1)};
  EXPECT_FALSE(DecodeConnectRequest(EncodeConnectRequest(u)).ok());
  FourTuple none;  // AF_UNSPEC
  EXPECT_FALSE(DecodeConnectRequest(EncodeConnectRequest(none)).ok());
}

// ---- addresses ---------------------------------------------------------------------------------

TEST(proto_wire, CanonicalAddressUnmapsV4MappedV6) {
  sockaddr_storage mapped = V6("::ffff:192.0.2.33", 8080);
  sockaddr_storage c = CanonicalAddress(Sa(mapped), sizeof(sockaddr_in6));
  ASSERT_EQ(c.ss_family, AF_INET);
  const auto& in = reinterpret_cast<const sockaddr_in&>(c);
  EXPECT_EQ(ntohs(in.sin_port), 8080);
  char text[INET_ADDRSTRLEN];
  ASSERT_NE(inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text)), nullptr);
  EXPECT_STREQ(text, "192.0.2.33");
  EXPECT_TRUE(SameAddress(c, V4("192.0.2.33", 8080)));
  EXPECT_FALSE(SameAddress(c, V4("192.0.2.33", 8081)));
  EXPECT_FALSE(SameAddress(c, mapped));  // the raw mapped form is another family
}

TEST(proto_wire, CanonicalAddressKeepsPlainAddresses) {
  sockaddr_storage v4 = V4("127.0.0.1", 5);
  EXPECT_TRUE(SameAddress(CanonicalAddress(Sa(v4), sizeof(sockaddr_in)), v4));
  sockaddr_storage v6 = V6("::1", 6);
  reinterpret_cast<sockaddr_in6&>(v6).sin6_flowinfo = 99;  // dropped: not part of the identity
  sockaddr_storage c = CanonicalAddress(Sa(v6), sizeof(sockaddr_in6));
  EXPECT_EQ(c.ss_family, AF_INET6);
  EXPECT_EQ(reinterpret_cast<const sockaddr_in6&>(c).sin6_flowinfo, 0u);
  EXPECT_TRUE(SameAddress(c, v6));
  // ::ffff:0:0/96 only; an IPv4-compatible ::a.b.c.d address stays IPv6.
  sockaddr_storage compat = V6("::192.0.2.1", 7);
  EXPECT_EQ(CanonicalAddress(Sa(compat), sizeof(sockaddr_in6)).ss_family, AF_INET6);
}

TEST(proto_wire, CanonicalAddressOfGarbageIsUnspec) {
  sockaddr_storage v4 = V4("127.0.0.1", 5);
  EXPECT_EQ(CanonicalAddress(Sa(v4), sizeof(sockaddr_in) - 1).ss_family, AF_UNSPEC);
  sockaddr_storage v6 = V6("::1", 5);
  EXPECT_EQ(CanonicalAddress(Sa(v6), sizeof(sockaddr_in6) - 1).ss_family, AF_UNSPEC);
  sockaddr_storage unix_addr{};
  unix_addr.ss_family = AF_UNIX;
  EXPECT_EQ(CanonicalAddress(Sa(unix_addr), sizeof(unix_addr)).ss_family, AF_UNSPEC);
  EXPECT_FALSE(SameAddress(sockaddr_storage{}, sockaddr_storage{}));
}

// ---- randomized --------------------------------------------------------------------------------

// Arbitrary input: decoders either reject with EPROTO or accept something that encodes back to
// exactly the input. Biased towards near-valid inputs so the accept paths are exercised too.
TEST(proto_wire, RandomInputsRejectOrRoundTrip) {
  std::mt19937_64 rng(0x5a11b);
  int accepted_imm = 0, accepted_wakeup = 0, accepted_request = 0;
  for (int i = 0; i < 200000; ++i) {
    uint32_t imm = static_cast<uint32_t>(rng());
    if (i % 2) imm = (imm & ~(0xfu << 16)) | (kWireVersion << 16);
    Result<Header> h = DecodeImm(imm);
    if (h.ok()) {
      ++accepted_imm;
      ASSERT_EQ(EncodeImm(h.value()), imm);
    } else {
      ASSERT_EQ(h.status().code(), EPROTO);
    }
  }
  for (int i = 0; i < 100000; ++i) {
    std::byte in[WakeupBody::kSize + 4];
    for (auto& b : in) b = static_cast<std::byte>(rng());
    size_t len = rng() % sizeof(in);
    if (i % 2) {  // near-valid
      len = WakeupBody::kSize;
      const uint8_t magic[4] = {0x57, 0x4e, 0x41, 0x53};
      memcpy(in, magic, 4);
      in[5] = std::byte{0};
      if (i % 4 == 1) memset(in + 12, 0, 4);
    }
    Result<WakeupBody> w = DecodeWakeup(in, len);
    if (w.ok()) {
      ++accepted_wakeup;
      std::byte out[WakeupBody::kSize];
      EncodeWakeup(w.value(), out);
      ASSERT_EQ(len, WakeupBody::kSize);
      ASSERT_EQ(0, memcmp(out, in, WakeupBody::kSize));
    } else {
      ASSERT_EQ(w.status().code(), EPROTO);
    }
  }
  for (int i = 0; i < 100000; ++i) {
    fabric::ConnectData d;
    for (auto& b : d.bytes) b = static_cast<uint8_t>(rng());
    d.length = static_cast<uint8_t>(rng());
    if (i % 2) {  // near-valid
      d.bytes[0] = 1;
      d.bytes[1] = (i % 4 == 1) ? 4 : 6;
      d.length = d.bytes[1] == 4 ? 14 : 38;
      if (i % 8 == 3) d.length += static_cast<uint8_t>(rng() % 3) - 1;
    }
    Result<FourTuple> t = DecodeConnectRequest(d);
    if (t.ok()) {
      ++accepted_request;
      fabric::ConnectData again = EncodeConnectRequest(t.value());
      ASSERT_EQ(again.length, d.length);
      ASSERT_EQ(0, memcmp(again.bytes, d.bytes, d.length));
    } else {
      ASSERT_EQ(t.status().code(), EPROTO);
    }
  }
  // The generator reaches both outcomes for every decoder.
  EXPECT_GT(accepted_imm, 1000);
  EXPECT_GT(accepted_wakeup, 1000);
  EXPECT_GT(accepted_request, 1000);
}

}  // namespace
}  // namespace san::proto
