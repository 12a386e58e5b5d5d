// Data-connection addresses on the control connection: PORT/PASV (RFC 959 "h1,h2,h3,h4,p1,p2"),
// EPRT/EPSV (RFC 2428 "|af|addr|port|"), their replies (227/229) and REST offsets.
//
// Pure functions of their input, shared by ftpd (parsing what clients send) and ftp_client
// (parsing what servers reply), fuzzed with the command parser. Encoders produce exactly what the
// decoders accept. Thread-safety: stateless.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace san::ftp {

// An IPv4 or IPv6 address and port (ss_family AF_INET or AF_INET6).
struct HostPort {
  sockaddr_storage addr{};
  socklen_t len = 0;

  uint16_t port() const;
  std::string host() const;  // numeric
  int family() const { return addr.ss_family; }
};

HostPort MakeHostPort(const sockaddr* sa, socklen_t len);

// "h1,h2,h3,h4,p1,p2", each 0..255 decimal, no signs or spaces.
std::optional<HostPort> ParsePortArg(std::string_view arg);
std::string FormatPortArg(const HostPort& hp);  // IPv4 only
// "|1|a.b.c.d|port|" or "|2|ipv6|port|"; any printable delimiter 33..126 as RFC 2428 allows.
std::optional<HostPort> ParseEprtArg(std::string_view arg);
std::string FormatEprtArg(const HostPort& hp);
// The port of a 229 reply text "Entering Extended Passive Mode (|||port|)".
std::optional<uint16_t> ParseEpsvReply(std::string_view text);
// The address of a 227 reply text "Entering Passive Mode (h1,h2,h3,h4,p1,p2)" (parentheses
// optional, as RFC 1123 4.1.2.6 says clients must cope with).
std::optional<HostPort> ParsePasvReply(std::string_view text);
// A REST offset: decimal digits only, fits in int64.
std::optional<uint64_t> ParseOffset(std::string_view arg);

}  // namespace san::ftp
