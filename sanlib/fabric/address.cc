#include "sanlib/fabric/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "sanlib/common/inet_address.h"

namespace san::fabric {
namespace {

using IpAddress = InetAddress;

// The address reduced (InetAddress: v4-mapped v6 becomes v4), or why it is no IP address.
Result<IpAddress> Normalise(const sockaddr* addr, socklen_t len) {
  if (addr != nullptr && len >= static_cast<socklen_t>(sizeof(sa_family_t)) &&
      addr->sa_family != AF_INET && addr->sa_family != AF_INET6) {
    return Status(EAFNOSUPPORT, "address family");
  }
  std::optional<InetAddress> ip = ReduceInet(addr, len);
  if (!ip) return Status(EINVAL, "address length");
  return *ip;
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

std::string HostKey(const sockaddr* addr, socklen_t len) {
  if (addr == nullptr) return std::string();
  sockaddr_storage copy{};
  std::memcpy(&copy, addr, std::min<size_t>(len, sizeof(copy)));
  if (copy.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&copy)->sin_port = 0;
  if (copy.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&copy)->sin6_port = 0;
  Result<std::string> key = AddressKey(reinterpret_cast<sockaddr*>(&copy), len);
  return key.ok() ? key.value() : std::string();
}

std::vector<std::string> InterfaceHostKeys(bool (*wanted)(const char* interface_name)) {
  std::vector<std::string> keys;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return keys;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_name == nullptr) continue;
    const int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (!wanted(i->ifa_name)) continue;
    std::string k =
        HostKey(i->ifa_addr, family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6));
    if (!k.empty()) keys.push_back(std::move(k));
  }
  freeifaddrs(list);
  return keys;
}

}  // namespace san::fabric
