// The SAN stream protocol's wire format: the 32-bit immediate carried by every packet, and the
// WAKEUP body. The one place where bits on the wire are defined (docs/protocol.md draws them).
//
//   immediate (host order; providers carry it as a 32-bit value):
//     31..28 type     DATA=1 ACK=2 WAKEUP=3 FIN=4 FINACK=5 (0 and 6..15 invalid)
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

#include "common/status.h"
#include "fabric/provider.h"

namespace san::proto {

constexpr uint32_t kWireVersion = 1;

enum class PacketType : uint8_t { kData = 1, kAck = 2, kWakeup = 3, kFin = 4, kFinAck = 5 };

struct Header {
  PacketType type = PacketType::kData;
  uint8_t credits = 0;
  uint16_t seq = 0;
};

uint32_t EncodeImm(const Header& h);
Result<Header> DecodeImm(uint32_t imm);

// WAKEUP: each side's first packet. Says how many of the sender's receive buffers the peer may use
// for DATA (its window) and how large they are. Little-endian fixed layout.
struct WakeupBody {
  static constexpr uint32_t kMagic = 0x53414e57;  // "SANW"
  static constexpr size_t kSize = 16;
  uint16_t window = 0;       // DATA packets the peer may have in flight towards us
  uint16_t ack_reserve = 0;  // extra receives posted for ACKs and FIN (w/t + 1)
  uint32_t buffer_size = 0;  // bytes per receive buffer = largest DATA payload we accept
  uint32_t flags = 0;        // reserved, 0
};

void EncodeWakeup(const WakeupBody& body, std::byte out[WakeupBody::kSize]);
Result<WakeupBody> DecodeWakeup(const std::byte* in, size_t length);

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

}  // namespace san::proto
