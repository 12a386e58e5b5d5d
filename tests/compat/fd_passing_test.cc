// A connection passed to another process over SCM_RIGHTS (socket/fd_passing.h): process A accepts,
// sends the accepted fd to process B over a Unix socket and closes its copy; B reads the client's
// request (sent before the pass, still unread in A) and answers 1 MiB, then closes. The client C
// must get every byte and then EOF -- on a SAN connection exactly as on a kernel one (the oracle).
// It used to receive 0 bytes with no error: B wrote to a kernel socket the SAN peer never read.
// Linked with the link-in compatibility layer: socket/accept/sendmsg/read/write are interposed.
#include <errno.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "compat/pair.h"

namespace san::testing_support {
namespace {

constexpr size_t kRequest = 100000;
constexpr size_t kReply = 1 << 20;

uint8_t RequestByte(size_t i) { return static_cast<uint8_t>(i * 7 + 3); }
uint8_t ReplyByte(size_t i) { return static_cast<uint8_t>(i * 131 + (i >> 10)); }

// B: takes one fd from `unix_fd`, reads the request, answers, closes. Exit status says what failed.
[[noreturn]] void Receiver(int unix_fd) {
  alarm(30);
  char dummy;
  iovec iov{&dummy, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  if (recvmsg(unix_fd, &m, 0) != 1) _exit(10);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  if (!c || c->cmsg_type != SCM_RIGHTS) _exit(11);
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  std::vector<uint8_t> buf(kReply);
  if (!ReadAll(fd, buf.data(), kRequest)) _exit(12);
  for (size_t i = 0; i < kRequest; ++i) {
    if (buf[i] != RequestByte(i)) _exit(13);
  }
  for (size_t i = 0; i < kReply; ++i) buf[i] = ReplyByte(i);
  if (!WriteAll(fd, buf.data(), kReply)) _exit(14);
  close(fd);
  _exit(0);
}

// C: connects to the port from `port_fd`, sends the request, reads the reply and then EOF.
[[noreturn]] void Client(int port_fd, bool san) {
  alarm(30);
  const int fd = ConnectToPortFrom(port_fd, san);
  if (fd < 0) _exit(21);
  std::vector<uint8_t> buf(kReply + 1);
  for (size_t i = 0; i < kRequest; ++i) buf[i] = RequestByte(i);
  if (!WriteAll(fd, buf.data(), kRequest)) _exit(22);
  const ssize_t got = ReadToEof(fd, &buf);
  if (got < 0) _exit(23);
  if (got != static_cast<ssize_t>(kReply)) _exit(25);
  for (size_t i = 0; i < kReply; ++i) {
    if (buf[i] != ReplyByte(i)) _exit(26);
  }
  close(fd);
  _exit(0);
}

class FdPassing : public ::testing::TestWithParam<bool> {};

TEST_P(FdPassing, AcceptedConnectionPassedToAnotherProcessLosesNothing) {
  const bool san = GetParam();
  int unix_pair[2], port_pipe[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, unix_pair), 0);
  ASSERT_EQ(pipe2(port_pipe, O_CLOEXEC), 0);
  // Both children before this process uses sanlib: they start with nothing of ours.
  const pid_t receiver = fork();
  if (receiver == 0) Receiver(unix_pair[1]);
  const pid_t client = fork();
  if (client == 0) Client(port_pipe[0], san);
  close(unix_pair[1]);
  close(port_pipe[0]);

  const int listener = LoopbackListener(san);
  const uint16_t port = PortOf(listener);
  ASSERT_EQ(write(port_pipe[1], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  const int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0) << strerror(errno);
  san_info info{};
  if (san) {
    ASSERT_EQ(san_getinfo(conn, &info), 0);
    ASSERT_EQ(info.mode, SAN_MODE_SHM) << "not on the fast path to begin with";
    // Let the request arrive here unread: the move must return it to the peer's kernel socket.
    usleep(50000);
  }
  char one = 'x';
  iovec iov{&one, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &conn, sizeof conn);
  ASSERT_EQ(sendmsg(unix_pair[0], &m, 0), 1) << strerror(errno);
  if (san) {
    ASSERT_EQ(san_getinfo(conn, &info), 0);
    EXPECT_EQ(info.mode, SAN_MODE_TCP) << "the passed connection did not move to kernel TCP";
  }
  close(conn);
  close(listener);

  int status = -1;
  ASSERT_EQ(waitpid(receiver, &status, 0), receiver);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "receiver: status " << status << " (exit " << WEXITSTATUS(status) << ")";
  ASSERT_EQ(waitpid(client, &status, 0), client);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "client: status " << status << " (exit " << WEXITSTATUS(status) << ")";
  close(unix_pair[0]);
  close(port_pipe[1]);
}

INSTANTIATE_TEST_SUITE_P(SanAndKernel, FdPassing, ::testing::Bool(), Name);

}  // namespace
}  // namespace san::testing_support
