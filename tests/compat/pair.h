// Test support for the compatibility layer: a connected TCP pair made either through the
// interposed socket() (both ends SAN sockets: the shm fast path) or with raw system calls that no
// interposition sees (both ends plain kernel sockets: the oracle). Test-only.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

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

inline std::string Name(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "San" : "Kernel";
}

}  // namespace san::testing_support
