// Test support: SAN sockets on loopback through the public C API -- a listener on an ephemeral
// port and a connected client. Test-only; needs <san/san.h> (link with san).
#pragma once

#include <cstdint>

#include "san/san.h"
#include "support/inet.h"

namespace san::testing_support {

// A SAN listener on 127.0.0.1 with an ephemeral port (written to *port), or -1.
inline int SanListenLoopback(uint16_t* port) {
  const int fd = san_socket(AF_INET, SOCK_SAN, 0);
  sockaddr_in a = Loopback(0);
  if (san_bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || san_listen(fd, 16) != 0) {
    return -1;
  }
  socklen_t len = sizeof a;
  san_getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

// A SAN socket connected to 127.0.0.1:port, or -1.
inline int SanConnectLoopback(uint16_t port) {
  const int fd = san_socket(AF_INET, SOCK_SAN, 0);
  sockaddr_in a = Loopback(port);
  return san_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? fd : -1;
}

}  // namespace san::testing_support
