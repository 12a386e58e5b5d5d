#include "sanlib/common/inet_address.h"

#include <arpa/inet.h>

#include <cstring>

namespace san {

std::optional<InetAddress> ReduceInet(const sockaddr* addr, socklen_t len) {
  if (addr == nullptr || len < static_cast<socklen_t>(sizeof(sa_family_t))) return std::nullopt;
  InetAddress a;
  if (addr->sa_family == AF_INET) {
    if (len < static_cast<socklen_t>(sizeof(sockaddr_in))) return std::nullopt;
    sockaddr_in in;
    memcpy(&in, addr, sizeof in);
    a.family = AF_INET;
    memcpy(a.bytes, &in.sin_addr, 4);
    a.port = ntohs(in.sin_port);
    return a;
  }
  if (addr->sa_family != AF_INET6 || len < static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    return std::nullopt;
  }
  sockaddr_in6 in6;
  memcpy(&in6, addr, sizeof in6);
  a.port = ntohs(in6.sin6_port);
  if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
    a.family = AF_INET;
    memcpy(a.bytes, &in6.sin6_addr.s6_addr[12], 4);
  } else {
    a.family = AF_INET6;
    memcpy(a.bytes, &in6.sin6_addr, 16);
  }
  return a;
}

sockaddr_storage ToSockaddr(const InetAddress& a) {
  sockaddr_storage out{};
  if (a.family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(&out);
    in->sin_family = AF_INET;
    in->sin_port = htons(a.port);
    memcpy(&in->sin_addr, a.bytes, 4);
  } else if (a.family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&out);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(a.port);
    memcpy(&in6->sin6_addr, a.bytes, 16);
  }
  return out;
}

}  // namespace san
