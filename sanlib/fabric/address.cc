#include "sanlib/fabric/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace san::fabric {
namespace {

// The address normalised to (family, 16 raw bytes, port); v4-mapped v6 becomes v4.
struct IpAddress {
  int family = 0;
  uint8_t bytes[16] = {};
  uint16_t port = 0;  // host byte order
};

Result<IpAddress> Normalise(const sockaddr* addr, socklen_t len) {
  if (addr == nullptr || len < static_cast<socklen_t>(sizeof(sa_family_t))) {
    return Status(EINVAL, "address length");
  }
  IpAddress ip;
  if (addr->sa_family == AF_INET) {
    if (len < static_cast<socklen_t>(sizeof(sockaddr_in))) return Status(EINVAL, "address length");
    sockaddr_in sin;
    std::memcpy(&sin, addr, sizeof(sin));
    ip.family = AF_INET;
    std::memcpy(ip.bytes, &sin.sin_addr, 4);
    ip.port = ntohs(sin.sin_port);
    return ip;
  }
  if (addr->sa_family == AF_INET6) {
    if (len < static_cast<socklen_t>(sizeof(sockaddr_in6))) return Status(EINVAL, "address length");
    sockaddr_in6 sin6;
    std::memcpy(&sin6, addr, sizeof(sin6));
    ip.port = ntohs(sin6.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&sin6.sin6_addr)) {
      ip.family = AF_INET;
      std::memcpy(ip.bytes, &sin6.sin6_addr.s6_addr[12], 4);
    } else {
      ip.family = AF_INET6;
      std::memcpy(ip.bytes, &sin6.sin6_addr, 16);
    }
    return ip;
  }
  return Status(EAFNOSUPPORT, "address family");
}

std::string Format(const IpAddress& ip) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(ip.family, ip.bytes, text, sizeof(text));
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) about "[" + std::string(...).
  std::string key;
  if (ip.family == AF_INET6) key.push_back('[');
  key.append(text);
  if (ip.family == AF_INET6) key.push_back(']');
  key.push_back(':');
  key.append(std::to_string(ip.port));
  return key;
}

}  // namespace

Result<std::string> AddressKey(const sockaddr* addr, socklen_t len) {
  Result<IpAddress> ip = Normalise(addr, len);
  if (!ip.ok()) return ip.status();
  return Format(ip.value());
}

Status ConnectKeys(const sockaddr* addr, socklen_t len, std::vector<std::string>* keys) {
  Result<IpAddress> ip = Normalise(addr, len);
  if (!ip.ok()) return ip.status();
  keys->clear();
  keys->push_back(Format(ip.value()));
  if (IsPrivateRendezvous(addr, len)) return Status::Ok();
  IpAddress wildcard;
  wildcard.family = ip->family;
  wildcard.port = ip->port;
  std::string any = Format(wildcard);
  if (any != keys->front()) keys->push_back(any);
  if (ip->family == AF_INET) {
    wildcard.family = AF_INET6;
    keys->push_back(Format(wildcard));
  }
  return Status::Ok();
}

sockaddr_in6 PrivateRendezvousAddress(uint64_t id, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr.s6_addr[0] = 0x01;  // 100::/64
  for (int i = 0; i < 8; ++i) a.sin6_addr.s6_addr[8 + i] = static_cast<uint8_t>(id >> (8 * i));
  a.sin6_port = htons(port == 0 ? 1 : port);
  return a;
}

bool IsPrivateRendezvous(const sockaddr* addr, socklen_t len) {
  if (addr->sa_family != AF_INET6 || len < sizeof(sockaddr_in6)) return false;
  static const uint8_t kPrefix[8] = {0x01, 0, 0, 0, 0, 0, 0, 0};
  return std::memcmp(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr.s6_addr, kPrefix, 8) ==
         0;
}

bool IsLoopbackAddress(const sockaddr* addr, socklen_t len) {
  Result<IpAddress> ip = Normalise(addr, len);
  if (!ip.ok()) return false;
  if (ip->family == AF_INET) return ip->bytes[0] == 127;
  static const uint8_t kLoopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(ip->bytes, kLoopback6, 16) == 0;
}

}  // namespace san::fabric
