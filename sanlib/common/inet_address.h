// InetAddress: an IPv4 or IPv6 socket address reduced to (family, raw address bytes, port), with
// an IPv4-mapped IPv6 address (::ffff:a.b.c.d, what a dual-stack socket reports for an IPv4 peer)
// folded to IPv4. The one place that normalisation is written; addresses are compared, matched
// against rules and looked up in their reduced form.
// Thread-safety: stateless.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>

namespace san {

struct InetAddress {
  int family = 0;          // AF_INET or AF_INET6
  uint8_t bytes[16] = {};  // 4 used for AF_INET
  uint16_t port = 0;       // host byte order
};

// nullopt for another family, or a length too short for the family's sockaddr.
std::optional<InetAddress> ReduceInet(const sockaddr* addr, socklen_t len);
inline std::optional<InetAddress> ReduceInet(const sockaddr_storage& ss) {
  return ReduceInet(reinterpret_cast<const sockaddr*>(&ss), sizeof ss);
}

// Back to a sockaddr (sockaddr_in or sockaddr_in6, flow label and scope zero).
sockaddr_storage ToSockaddr(const InetAddress& a);

}  // namespace san
