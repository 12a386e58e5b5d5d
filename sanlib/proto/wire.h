// The SAN stream protocol's wire format: the 32-bit immediate carried by every packet, and the
// WAKEUP body. The one place where bits on the wire are defined (docs/protocol.md draws them).
//
//   immediate (host order; providers carry it as a 32-bit value):
//     31..28 type     DATA=1 ACK=2 WAKEUP=3 FIN=4 FINACK=5 ADVERT=6 PUT=7 MOVE=8 MOVED=9
//                     (0 and 10..15 invalid)
//     27..20 credits  receive buffers the sender of this packet has freed since its last report
//     19..16 version  kWireVersion
//     15..0  seq      per-direction packet number mod 2^16 (every packet type counts)
//
// Pure functions; thread-safe. Decoding never trusts input: an unknown type, a wrong version or a
// body of the wrong size is an error (EPROTO) that aborts the connection.
#pragma once

#include <cstddef>
#include <cstdint>

#include <netinet/in.h>
#include <sys/socket.h>

#include "sanlib/common/status.h"
#include "sanlib/fabric/provider.h"

namespace san::proto {

constexpr uint32_t kWireVersion = 1;

enum class PacketType : uint8_t {
  kData = 1,
  kAck = 2,
  kWakeup = 3,
  kFin = 4,
  kFinAck = 5,
  kAdvert = 6,  // single copy, receiver -> sender: "write up to length bytes into this window"
  kPut = 7,     // single copy, sender -> receiver: "I wrote length bytes into your window"
  kMove = 8,    // "this connection continues over the kernel TCP socket" (exec, docs/compat.md)
  kMoved = 9,   // the answer: nothing more comes over SAN either
};

struct Header {
  PacketType type = PacketType::kData;
  uint8_t credits = 0;
  uint16_t seq = 0;
};

uint32_t EncodeImm(const Header& h);
Result<Header> DecodeImm(uint32_t imm);

// WAKEUP: each side's first packet. Says how many of the sender's receive buffers the peer may use
// for DATA (its window) and how large they are. Little-endian fixed layout.
// A connection that began on kernel TCP and moves to SAN (socket/late_upgrade.h) says where its
// TCP part ends: kWakeupFromTcp, and 8 more bytes (24 in all) with the number of bytes the sender
// wrote to the kernel socket before it (tcp_bytes); one byte more follows there, the wake byte,
// which is not data.
// A client that filed its channel before connect() chose its TCP port (the connect request's
// client port 0: socket_ops.cc SetUpChannel) names the port here: kWakeupNamesSource, and 8 more
// bytes (after tcp_bytes if both) with the port and 6 zero bytes.
struct WakeupBody {
  static constexpr uint32_t kMagic = 0x53414e57;  // "SANW"
  static constexpr size_t kSize = 16;
  static constexpr size_t kSizeFromTcp = 24;
  static constexpr size_t kMaxSize = 32;
  uint16_t window = 0;       // DATA packets the peer may have in flight towards us
  uint16_t ack_reserve = 0;  // extra receives posted for ACKs and FIN (w/t + 1)
  uint32_t buffer_size = 0;  // bytes per receive buffer = largest DATA payload we accept
  uint32_t flags = 0;        // kWakeupCanWrite, kWakeupFromTcp, kWakeupNamesSource; others 0
  uint64_t tcp_bytes = 0;    // kWakeupFromTcp only
  uint16_t source_port = 0;  // kWakeupNamesSource only (host order; never 0 then)
  size_t size() const;       // kSize, plus 8 for each of kWakeupFromTcp and kWakeupNamesSource
};
static_assert(WakeupBody::kSize == 16);
// WAKEUP flag: the sender of this WAKEUP can write into windows the receiver exposes (single copy:
// its provider has kCapSingleCopy and the kernel let it write into the receiver's process).
constexpr uint32_t kWakeupCanWrite = 1u << 0;
// WAKEUP flag: tcp_bytes is present (above).
constexpr uint32_t kWakeupFromTcp = 1u << 1;
// WAKEUP flag: source_port is present (above).
constexpr uint32_t kWakeupNamesSource = 1u << 2;
constexpr uint32_t kWakeupKnownFlags = kWakeupCanWrite | kWakeupFromTcp | kWakeupNamesSource;

// `out` has room for body.size() bytes.
void EncodeWakeup(const WakeupBody& body, std::byte* out);
Result<WakeupBody> DecodeWakeup(const std::byte* in, size_t length);

// ADVERT body (single copy): a receiver blocked in recv() with nothing queued offers its buffer.
// The sender may write into it only if exactly `stream_offset` bytes of its stream have been sent
// before (nothing of it is in flight), and then must follow with a PUT. Little-endian, 32 bytes:
//   0 magic u32 "SANA" | 4 generation u32 | 8 stream_offset u64 | 16 addr u64 | 24 length u32 |
//   28 reserved u32 (0)
struct AdvertBody {
  static constexpr uint32_t kMagic = 0x53414e41;  // "SANA"
  static constexpr size_t kSize = 32;
  uint32_t generation = 0;     // the provider's WindowKey::generation
  uint64_t stream_offset = 0;  // bytes of the peer's stream this side has received so far
  uint64_t addr = 0;           // WindowKey::addr, in the receiver's address space
  uint32_t length = 0;         // WindowKey::length, > 0
};
static_assert(AdvertBody::kSize == 4 + 4 + 8 + 8 + 4 + 4);
void EncodeAdvert(const AdvertBody& body, std::byte out[AdvertBody::kSize]);
Result<AdvertBody> DecodeAdvert(const std::byte* in, size_t length);

// PUT body (single copy): the sender wrote `length` bytes into the window of `generation`, which
// are the next bytes of the stream; length 0 declines: the sender cannot write into our windows
// (any more), and the window is spent. Little-endian, 16 bytes:
//   0 magic u32 "SANP" | 4 generation u32 | 8 length u32 | 12 reserved u32 (0)
struct PutBody {
  static constexpr uint32_t kMagic = 0x53414e50;  // "SANP"
  static constexpr size_t kSize = 16;
  uint32_t generation = 0;
  uint32_t length = 0;
};
static_assert(PutBody::kSize == 4 + 4 + 4 + 4);
void EncodePut(const PutBody& body, std::byte out[PutBody::kSize]);
Result<PutBody> DecodePut(const std::byte* in, size_t length);

// The header a side that moved its connection to TCP (MOVE, then MOVED received) writes first on
// the kernel socket: how many of the peer's bytes it had received but not delivered, which follow
// at once and which the peer sends back over TCP ahead of anything new. Little-endian, 16 bytes:
//   0 magic u32 "SANM" | 4 version u32 (1) | 8 returned u64
struct MoveHeader {
  static constexpr uint32_t kMagic = 0x53414e4d;  // "SANM"
  static constexpr uint32_t kVersion = 1;
  static constexpr size_t kSize = 16;
  uint64_t returned = 0;
};
void EncodeMoveHeader(const MoveHeader& header, std::byte out[MoveHeader::kSize]);
Result<MoveHeader> DecodeMoveHeader(const std::byte* in, size_t length);

// The connection request a SAN client hands to the listener's rendezvous (fabric ConnectData):
// the 4-tuple of the kernel TCP connection it is about to make, by which accept() finds the
// channel.
//   byte 0      version (1)
//   byte 1      family (4 or 6)
//   bytes 2..3  client port, 4..5 server port (network order)
//   then the client address and the server address (4 or 16 bytes each)
struct FourTuple {
  sockaddr_storage client{};  // the connecting side's TCP local address
  sockaddr_storage server{};  // the address it connects to
};

// Both addresses must be canonical (CanonicalAddress) and of one family; otherwise the result is
// the empty request (length 0), which DecodeConnectRequest rejects.
fabric::ConnectData EncodeConnectRequest(const FourTuple& tuple);
Result<FourTuple> DecodeConnectRequest(const fabric::ConnectData& data);
// IPv4-mapped IPv6 addresses become plain IPv4, so a dual-stack listener and an IPv4 client agree.
sockaddr_storage CanonicalAddress(const sockaddr* addr, socklen_t len);
bool SameAddress(const sockaddr_storage& a, const sockaddr_storage& b);
// The port of an IPv4 or IPv6 address, in network order (sin_port and sin6_port share an offset).
inline in_port_t& PortField(sockaddr_storage& a) {
  return reinterpret_cast<sockaddr_in&>(a).sin_port;
}
inline in_port_t PortOf(const sockaddr_storage& a) {
  return reinterpret_cast<const sockaddr_in&>(a).sin_port;
}

}  // namespace san::proto
