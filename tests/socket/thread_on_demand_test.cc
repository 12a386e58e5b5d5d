// The connection thread started when needed (connection_thread.h StartsWithFirstSocket): under
// the late set-up a single-threaded process that only listens and makes short connections stays
// single-threaded -- an accept-then-fork server's parent included, whose forks would otherwise
// be those of a multithreaded process -- and the thread starts once a connection is due to move
// while the process waits, after which the connection moves as it always did. Each case runs in
// its own process (ctest), single-threaded until it says otherwise.
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "san/san.h"
#include "support/san_loopback.h"

// Before sanlib reads its configuration (on the first san_* call).
static const bool kLateSetup = [] {
  setenv("SAN_SETUP", "late", 1);
  setenv("SAN_UPGRADE_DELAY_US", "2000", 1);
  return true;
}();

namespace {

using san::testing_support::SanConnectLoopback;
using san::testing_support::SanListenLoopback;

int ThreadCount() {
  DIR* d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

int ModeOf(int fd) {
  san_info info{};
  return san_getinfo(fd, &info) == 0 ? info.mode : -1;
}

// One byte from `from` echoed back by `to`; true if it came back intact.
bool EchoOnce(int from, int to, char byte) {
  char got = 0;
  return san_send(from, &byte, 1, MSG_NOSIGNAL) == 1 && san_recv(to, &got, 1, 0) == 1 &&
         san_send(to, &got, 1, MSG_NOSIGNAL) == 1 && san_recv(from, &got, 1, 0) == 1 && got == byte;
}

TEST(ThreadOnDemand, ListenerAndShortConnectionsLeaveTheProcessSingleThreaded) {
  ASSERT_EQ(ThreadCount(), 1);
  uint16_t port = 0;
  const int lfd = SanListenLoopback(&port);
  ASSERT_GE(lfd, 0);
  for (int i = 0; i < 20; ++i) {
    const int c = SanConnectLoopback(port);
    ASSERT_GE(c, 0);
    const int a = san_accept(lfd, nullptr, nullptr);
    ASSERT_GE(a, 0);
    EXPECT_TRUE(EchoOnce(c, a, static_cast<char>('a' + i)));
    EXPECT_EQ(ModeOf(c), SAN_MODE_TCP);  // too short to move, by design
    EXPECT_EQ(san_close(c), 0);
    EXPECT_EQ(san_close(a), 0);
  }
  EXPECT_EQ(ThreadCount(), 1);
  EXPECT_EQ(san_close(lfd), 0);
}

TEST(ThreadOnDemand, AConnectionDueWhileTheProcessWaitsStartsTheThreadAndMoves) {
  uint16_t port = 0;
  const int lfd = SanListenLoopback(&port);
  ASSERT_GE(lfd, 0);
  const int c = SanConnectLoopback(port);
  ASSERT_GE(c, 0);
  const int a = san_accept(lfd, nullptr, nullptr);
  ASSERT_GE(a, 0);
  EXPECT_TRUE(EchoOnce(c, a, 'x'));
  EXPECT_EQ(ThreadCount(), 1);
  // Waiting past the delay (2 ms) with the connection idle: the wait's naps start the thread.
  pollfd p[2] = {{c, POLLIN, 0}, {a, POLLIN, 0}};
  EXPECT_EQ(san_poll(p, 2, 30), 0);
  EXPECT_GT(ThreadCount(), 1);  // ours (ThreadSanitizer adds one of its own with it)
  // And the connection moves at its next exchanges, as with a thread from the start.
  bool intact = true;
  for (int i = 0; i < 200 && intact && (ModeOf(c) != SAN_MODE_SHM || ModeOf(a) != SAN_MODE_SHM);
       ++i) {
    intact = EchoOnce(c, a, static_cast<char>(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(intact);
  EXPECT_EQ(ModeOf(c), SAN_MODE_SHM);
  EXPECT_EQ(ModeOf(a), SAN_MODE_SHM);
  EXPECT_TRUE(EchoOnce(c, a, 'z'));
  for (int fd : {c, a, lfd}) EXPECT_EQ(san_close(fd), 0);
}

TEST(ThreadOnDemand, AcceptThenForkServerStaysSingleThreadedAndItsChildrenEcho) {
  uint16_t port = 0;
  const int lfd = SanListenLoopback(&port);
  ASSERT_GE(lfd, 0);
  constexpr int kConnections = 12;
  // The client: another process, connect + echo + close, exit status 0 if every echo came back.
  const pid_t client = fork();
  ASSERT_GE(client, 0);
  if (client == 0) {
    san_close(lfd);
    int good = 0;
    for (int i = 0; i < kConnections; ++i) {
      const int c = SanConnectLoopback(port);
      char b = static_cast<char>('A' + i), got = 0;
      if (c >= 0 && san_send(c, &b, 1, MSG_NOSIGNAL) == 1 && san_recv(c, &got, 1, 0) == 1 &&
          got == b) {
        ++good;
      }
      if (c >= 0) san_close(c);
    }
    _exit(good == kConnections ? 0 : 1);
  }
  // The server: accept, fork a child that echoes one byte and exits, close our copy.
  for (int i = 0; i < kConnections; ++i) {
    const int a = san_accept(lfd, nullptr, nullptr);
    ASSERT_GE(a, 0);
    const pid_t handler = fork();
    ASSERT_GE(handler, 0);
    if (handler == 0) {
      san_close(lfd);
      char b = 0;
      const bool ok = san_recv(a, &b, 1, 0) == 1 && san_send(a, &b, 1, MSG_NOSIGNAL) == 1;
      san_close(a);
      _exit(ok ? 0 : 1);
    }
    EXPECT_EQ(san_close(a), 0);
    int status = 0;
    ASSERT_EQ(waitpid(handler, &status, 0), handler);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "handler " << i;
  }
  int status = 0;
  ASSERT_EQ(waitpid(client, &status, 0), client);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(ThreadCount(), 1);  // every fork above was a single-threaded process's
  EXPECT_EQ(san_close(lfd), 0);
}

}  // namespace
