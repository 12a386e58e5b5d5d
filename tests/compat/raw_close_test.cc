// Sockets closed where no interposition sees it -- syscall(SYS_close), as Node.js's libuv does --
// must not leave a ghost behind (socket_ops.h: ReleaseGhost): whatever the kernel gives that
// number next (a plain client's connection, a file) works as on a kernel socket. It used to be
// taken for the closed SAN socket and reset, from plain clients too. Every case also runs on a
// kernel pair (the oracle). One difference stays: the SAN peer reads ECONNRESET where the kernel
// peer reads EOF (it sees the kernel socket close with no SAN FIN before it, as when a peer
// process dies: docs/compat.md).
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "compat/pair.h"

namespace san::testing_support {
namespace {

class RawClose : public ::testing::TestWithParam<bool> {};

int RawSocket() { return static_cast<int>(syscall(SYS_socket, AF_INET, SOCK_STREAM, 0)); }

// Waits (bounded) for fd to be readable, then reads.
ssize_t ReadWithin(int fd, char* buf, size_t n, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) != 1) return -2;
  return read(fd, buf, n);
}

TEST_P(RawClose, PeerSeesEofAndAPlainClientGetsTheNumberIntact) {
  const int listener = LoopbackListener(GetParam());
  ASSERT_GE(listener, 0);
  const sockaddr_in a = Loopback(PortOf(listener));
  const int client = StreamSocket(GetParam());
  ASSERT_EQ(connect(client, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
  const int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  // A plain client (raw calls: nothing of ours on its side), made now so that the next number
  // the kernel gives out is the closed socket's: the connection it accepts.
  const int plain = RawSocket();
  ASSERT_GE(plain, 0);
  ASSERT_EQ(syscall(SYS_close, server), 0);  // behind the library's back
  char buf[16];
  const ssize_t end = ReadWithin(client, buf, sizeof buf, 5000);
  if (GetParam()) {
    EXPECT_TRUE(end == 0 || (end < 0 && errno == ECONNRESET)) << end << " " << strerror(errno);
  } else {
    EXPECT_EQ(end, 0) << "the peer did not see EOF";
  }
  ASSERT_EQ(syscall(SYS_connect, plain, &a, sizeof a), 0) << strerror(errno);
  const int next = accept(listener, nullptr, nullptr);
  ASSERT_GE(next, 0);
  if (next != server) GTEST_SKIP() << "the kernel gave another number (" << next << ")";
  ASSERT_EQ(syscall(SYS_write, plain, "ping", 4), 4);
  ASSERT_EQ(ReadWithin(next, buf, 4, 5000), 4) << strerror(errno);
  EXPECT_EQ(std::string(buf, 4), "ping");
  ASSERT_EQ(write(next, "pong", 4), 4) << strerror(errno);
  pollfd p{plain, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  ASSERT_EQ(syscall(SYS_read, plain, buf, 4), 4);
  EXPECT_EQ(std::string(buf, 4), "pong");
  close(next);
  close(plain);
  close(client);
  close(listener);
}

TEST_P(RawClose, AFileThatGetsTheNumberReadsAsAFile) {
  TcpPair pair;
  MakePair(GetParam(), &pair);
  const int number = pair.server;
  ASSERT_EQ(syscall(SYS_close, number), 0);
  pair.server = -1;
  char path[] = "/tmp/san-raw-close-XXXXXX";
  const int file = mkstemp(path);
  ASSERT_GE(file, 0);
  unlink(path);
  ASSERT_EQ(pwrite(file, "file contents", 13, 0), 13);
  // The closed socket's number for the file (the lowest free at or above it: itself).
  const int at_number = static_cast<int>(syscall(SYS_fcntl, file, F_DUPFD, number));
  ASSERT_EQ(at_number, number);
  // The connection thread looks for ghosts once a second: within a few seconds read() must be
  // the file's (on the kernel pair at once).
  std::string got;
  for (int i = 0; i < 60 && got != "file contents"; ++i) {
    char buf[32] = {};
    lseek(at_number, 0, SEEK_SET);
    const ssize_t n = read(at_number, buf, sizeof buf);
    got.assign(buf, n > 0 ? static_cast<size_t>(n) : 0);
    if (got != "file contents") std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(got, "file contents");
  close(at_number);
  close(file);
}

INSTANTIATE_TEST_SUITE_P(SanAndKernel, RawClose, ::testing::Bool(), Name);

}  // namespace
}  // namespace san::testing_support
