// Test support: loopback socket addresses, the port a socket is bound to, and a kernel TCP pair.
// Test-only.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace san::testing_support {

inline sockaddr_in Loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// The local port of a bound socket, 0 if there is none (kernel getsockname: a SAN socket's fd is
// a kernel socket too).
inline uint16_t PortOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

// A connected pair of plain kernel TCP sockets on loopback, made with libc's calls (so not for a
// test that runs under the compatibility layer, where those are sanlib's): *client connected,
// *server accepted. False if a step failed (errno says why), with nothing left open.
inline bool KernelTcpPair(int* client, int* server) {
  *client = *server = -1;
  const int l = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = Loopback(0);
  socklen_t len = sizeof a;
  bool ok = l >= 0 && bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
            listen(l, 1) == 0 && getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  if (ok) *client = socket(AF_INET, SOCK_STREAM, 0);
  ok = ok && *client >= 0 && connect(*client, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (ok) *server = accept(l, nullptr, nullptr);
  ok = ok && *server >= 0;
  if (l >= 0) close(l);
  if (!ok && *client >= 0) close(*client);
  if (!ok) *client = *server = -1;
  return ok;
}

}  // namespace san::testing_support
