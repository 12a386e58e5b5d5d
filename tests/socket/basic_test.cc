// End-to-end through the public C API: two processes, a SAN listener and a SAN client on loopback.
// Establishes the mode (shm, not a silent fallback), moves data both ways with checksums, and
// checks orderly close (EOF) and san_getinfo counters.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "san/san.h"

namespace {

int Listener(uint16_t* port) {
  int fd = san_socket(AF_INET, SOCK_SAN, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (san_bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  if (san_listen(fd, 16) != 0) return -1;
  socklen_t len = sizeof a;
  san_getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int ConnectTo(uint16_t port) {
  int fd = san_socket(AF_INET, SOCK_SAN, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (san_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return -1;
  return fd;
}

uint8_t Pattern(size_t i) { return static_cast<uint8_t>((i * 131) ^ (i >> 9)); }

TEST(SocketBasic, ShmStreamBothWaysAndEof) {
  constexpr size_t kBytes = 8u << 20;
  int port_pipe[2];
  ASSERT_EQ(pipe(port_pipe), 0);
  pid_t child = fork();
  if (child == 0) {
    // Child: echo server on its own listener. Exit code says what went wrong. Bounded: if the
    // parent fails early (no ephemeral port left, say), the child must not outlive the test and
    // hold ctest's output pipe open.
    alarm(60);
    uint16_t p = 0;
    const int lfd = Listener(&p);
    if (lfd < 0 || write(port_pipe[1], &p, sizeof p) != sizeof p) _exit(1);
    int c = san_accept(lfd, nullptr, nullptr);
    if (c < 0) _exit(2);
    san_info info;
    if (san_getinfo(c, &info) != 0 || info.mode != SAN_MODE_SHM) _exit(3);
    std::vector<uint8_t> buf(100000);
    size_t total = 0;
    for (;;) {
      ssize_t n = san_recv(c, buf.data(), buf.size(), 0);
      if (n < 0) _exit(4);
      if (n == 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] != Pattern(total + i)) _exit(5);
      }
      if (san_send(c, buf.data(), n, 0) != n) _exit(6);
      total += n;
    }
    if (total != kBytes) _exit(7);
    san_close(c);
    _exit(0);
  }
  close(port_pipe[1]);  // a child that fails before writing is EOF here, not a wait forever
  uint16_t port = 0;
  const ssize_t got_port = read(port_pipe[0], &port, sizeof port);
  close(port_pipe[0]);
  const int fd = got_port == sizeof port ? ConnectTo(port) : -1;
  if (fd < 0) {
    const int err = errno;
    kill(child, SIGKILL);
    int st = 0;
    waitpid(child, &st, 0);
    FAIL() << (got_port == sizeof port ? "connect: " : "child's listener: ") << strerror(err)
           << " (child status " << st << ")";
  }
  san_info info;
  ASSERT_EQ(san_getinfo(fd, &info), 0);
  EXPECT_EQ(info.mode, SAN_MODE_SHM) << info.fallback;
  std::vector<uint8_t> out(kBytes), in(kBytes);
  for (size_t i = 0; i < kBytes; ++i) out[i] = Pattern(i);
  size_t sent = 0, got = 0;
  // Interleave sends and receives so the echo never stalls on a full window.
  while (got < kBytes) {
    if (sent < kBytes) {
      size_t chunk = std::min<size_t>(kBytes - sent, 1 + (sent % 70000));
      ssize_t n = san_send(fd, out.data() + sent, chunk, MSG_DONTWAIT);
      if (n > 0)
        sent += n;
      else
        ASSERT_EQ(errno, EAGAIN);
    }
    ssize_t n = san_recv(fd, in.data() + got, kBytes - got, MSG_DONTWAIT);
    if (n > 0)
      got += n;
    else if (n == 0 || errno != EAGAIN) {
      int st = 0;
      waitpid(child, &st, 0);
      FAIL() << n << " " << strerror(errno) << " child " << st;
    }
  }
  EXPECT_TRUE(out == in);
  ASSERT_EQ(san_shutdown(fd, SHUT_WR), 0);
  char c;
  EXPECT_EQ(san_recv(fd, &c, 1, 0), 0);  // the server closes after our FIN: EOF
  ASSERT_EQ(san_getinfo(fd, &info), 0);
  EXPECT_EQ(info.bytes_sent, kBytes);
  EXPECT_EQ(info.bytes_received, kBytes);
  EXPECT_EQ(san_close(fd), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// Bytes that reach the kernel socket under a SAN connection (a peer writing around its channel)
// cannot be placed in the stream: the reader gets ECONNRESET, not a stream with a hole in it (it
// used to log a warning and wait on, here until SO_RCVTIMEO: EAGAIN). Last in the file: it starts
// sanlib's threads in this process, and the tests above fork.
TEST(SocketBasic, BytesOnTheKernelSocketResetTheConnection) {
  uint16_t port = 0;
  const int lfd = Listener(&port);
  ASSERT_GE(lfd, 0);
  const int client = ConnectTo(port);
  ASSERT_GE(client, 0);
  const int server = san_accept(lfd, nullptr, nullptr);
  ASSERT_GE(server, 0);
  san_info info{};
  ASSERT_EQ(san_getinfo(server, &info), 0);
  ASSERT_EQ(info.mode, SAN_MODE_SHM);
  const timeval limit{5, 0};
  ASSERT_EQ(san_setsockopt(server, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit), 0);
  ASSERT_EQ(write(client, "around", 6), 6);  // libc's write: the kernel socket, not the channel
  char buf[16];
  EXPECT_EQ(san_recv(server, buf, sizeof buf, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  san_close(server);
  san_close(client);
  san_close(lfd);
}

}  // namespace

// A client bound to a port on every address before connect() (bindresvport does this; libtirpc's
// clients call it) announces the address the kernel will really use, so the server finds the
// channel: both ends on shm. (It announced 0.0.0.0, the server fell back to TCP and the client
// waited on its channel forever.)
TEST(SocketBasic, ClientBoundToWildcardBeforeConnect) {
  uint16_t port = 0;
  const int lfd = Listener(&port);
  ASSERT_GE(lfd, 0);
  const int fd = san_socket(AF_INET, SOCK_SAN, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(san_bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(san_connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  const int c = san_accept(lfd, nullptr, nullptr);
  ASSERT_GE(c, 0);
  san_info info{};
  ASSERT_EQ(san_getinfo(c, &info), 0);
  EXPECT_EQ(info.mode, SAN_MODE_SHM) << info.fallback;
  ASSERT_EQ(san_getinfo(fd, &info), 0);
  EXPECT_EQ(info.mode, SAN_MODE_SHM);
  ASSERT_EQ(san_send(fd, "ok", 2, 0), 2);
  char buf[2];
  EXPECT_EQ(san_recv(c, buf, 2, MSG_WAITALL), 2);
  san_close(c);
  san_close(fd);
  san_close(lfd);
}
