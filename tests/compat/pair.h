// Test support for the compatibility layer: a connected TCP pair made either through the
// interposed socket() (both ends SAN sockets: the shm fast path) or with raw system calls that no
// interposition sees (both ends plain kernel sockets: the oracle). Test-only.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "san/san.h"
#include "support/inet.h"

namespace san::testing_support {

struct TcpPair {
  int client = -1;
  int server = -1;
  ~TcpPair() {
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }
};

// A stream socket: through socket() (SAN-capable under the compatibility layer) or the raw call.
inline int StreamSocket(bool san) {
  return san ? socket(AF_INET, SOCK_STREAM, 0)
             : static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_STREAM, 0));
}

inline int LoopbackListener(bool san) {
  const int fd = StreamSocket(san);
  sockaddr_in a = Loopback(0);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 64) != 0) {
    ADD_FAILURE() << "listener: " << strerror(errno);
  }
  return fd;
}

inline void MakePair(bool san, TcpPair* pair) {
  const int listener = LoopbackListener(san);
  sockaddr_in a = Loopback(PortOf(listener));
  pair->client = StreamSocket(san);
  ASSERT_EQ(connect(pair->client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << strerror(errno);
  pair->server = accept(listener, nullptr, nullptr);
  ASSERT_GE(pair->server, 0) << strerror(errno);
  close(listener);
  san_info info{};
  if (san) {
    ASSERT_EQ(san_getinfo(pair->client, &info), 0);
    ASSERT_EQ(info.mode, SAN_MODE_SHM) << "the SAN pair is not on the fast path";
  } else {
    ASSERT_NE(san_getinfo(pair->client, &info), 0) << "the kernel pair is managed by sanlib";
  }
}

// Writes all n bytes; false if a write fails first.
inline bool WriteAll(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = write(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Reads exactly n bytes; false on EOF or error first.
inline bool ReadAll(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t k = read(fd, p, n);
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Reads until EOF into buf (filling at most all of it): the bytes read, or -1 on an error.
inline ssize_t ReadToEof(int fd, std::vector<uint8_t>* buf) {
  size_t got = 0;
  for (;;) {
    const ssize_t k = read(fd, buf->data() + got, buf->size() - got);
    if (k < 0) return -1;
    if (k == 0) return static_cast<ssize_t>(got);
    got += static_cast<size_t>(k);
    if (got == buf->size()) return static_cast<ssize_t>(got);
  }
}

// A test client's start, in a child process: the port its parent writes to `port_fd`, and a
// stream socket (StreamSocket(san)) connected to it on loopback; -1 if a step failed.
inline int ConnectToPortFrom(int port_fd, bool san) {
  uint16_t port = 0;
  if (read(port_fd, &port, sizeof port) != sizeof port) return -1;
  const int fd = StreamSocket(san);
  const sockaddr_in a = Loopback(port);
  if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) return -1;
  return fd;
}

inline std::string Name(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "San" : "Kernel";
}

}  // namespace san::testing_support
