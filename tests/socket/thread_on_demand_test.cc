// The connection thread started when needed (connection_thread.h StartsWithFirstSocket): under
// the late set-up a single-threaded server that only listens and accepts short connections stays
// single-threaded -- an accept-then-fork server's parent included, whose forks would otherwise
// be those of a multithreaded process; a connect() starts the client's thread; and the server's
// starts only once an accepted connection moves (an idle one needs none), which it does as it
// always did. Each case runs in its own process (ctest), single-threaded
// until it says otherwise.
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
  // The default delay, 20 ms: the short connections below must stay short on a loaded machine.
  setenv("SAN_UPGRADE_DELAY_US", "20000", 1);
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

// One byte out and its echo back; true if it came back intact.
bool RoundTrip(int fd, char byte) {
  char got = 0;
  return san_send(fd, &byte, 1, MSG_NOSIGNAL) == 1 && san_recv(fd, &got, 1, 0) == 1 && got == byte;
}

// Echoes every byte on `fd` until EOF; false on an error.
bool EchoUntilEof(int fd) {
  for (;;) {
    char b = 0;
    const ssize_t n = san_recv(fd, &b, 1, 0);
    if (n == 0) return true;
    if (n != 1 || san_send(fd, &b, 1, MSG_NOSIGNAL) != 1) return false;
  }
}

// A client process: `connections` connections one after the other, each a round trip and a close.
// Exit status 0 if every echo came back.
pid_t ShortClients(uint16_t port, int connections, int listener) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  san_close(listener);
  int good = 0;
  for (int i = 0; i < connections; ++i) {
    const int c = SanConnectLoopback(port);
    if (c >= 0 && RoundTrip(c, static_cast<char>('A' + i))) ++good;
    if (c >= 0) san_close(c);
  }
  _exit(good == connections ? 0 : 1);
}

TEST(ThreadOnDemand, ListenerAndShortAcceptedConnectionsLeaveTheServerSingleThreaded) {
  ASSERT_EQ(ThreadCount(), 1);
  uint16_t port = 0;
  const int lfd = SanListenLoopback(&port);
  ASSERT_GE(lfd, 0);
  constexpr int kConnections = 20;
  const pid_t client = ShortClients(port, kConnections, lfd);
  ASSERT_GE(client, 0);
  for (int i = 0; i < kConnections; ++i) {
    const int a = san_accept(lfd, nullptr, nullptr);
    ASSERT_GE(a, 0);
    EXPECT_TRUE(EchoUntilEof(a));
    EXPECT_EQ(ModeOf(a), SAN_MODE_TCP);  // too short to move, by design
    EXPECT_EQ(san_close(a), 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(client, &status, 0), client);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(ThreadCount(), 1);
  EXPECT_EQ(san_close(lfd), 0);
}

TEST(ThreadOnDemand, AConnectStartsTheClientsThread) {
  ASSERT_EQ(ThreadCount(), 1);
  uint16_t port = 0;
  const int lfd = SanListenLoopback(&port);
  ASSERT_GE(lfd, 0);
  EXPECT_EQ(ThreadCount(), 1);  // a listener alone needs none
  // sanstat asks the thread about the client's connection (socket_ops.cc).
  const int c = SanConnectLoopback(port);
  ASSERT_GE(c, 0);
  EXPECT_GT(ThreadCount(), 1);
  for (int fd : {c, lfd}) EXPECT_EQ(san_close(fd), 0);
}

// An idle candidate needs no thread (nothing is timed for it: late_upgrade.h); its move, once
// both ends are in use, starts it (the lower end's rendezvous, or the drive of its switch).
TEST(ThreadOnDemand, AnAcceptedConnectionStartsItsThreadOnlyWhenItMoves) {
  uint16_t port = 0;
  const int lfd = SanListenLoopback(&port);
  ASSERT_GE(lfd, 0);
  // The client: a round trip, 150 ms idle (past the 20 ms delay), then round trips until its end
  // is on shm. Exit 0 if all went.
  const pid_t client = fork();
  ASSERT_GE(client, 0);
  if (client == 0) {
    san_close(lfd);
    const int c = SanConnectLoopback(port);
    bool ok = c >= 0 && RoundTrip(c, 'x');
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    for (int i = 0; ok && i < 2000 && ModeOf(c) != SAN_MODE_SHM; ++i) {
      ok = RoundTrip(c, 'y');
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ok = ok && ModeOf(c) == SAN_MODE_SHM && RoundTrip(c, 'z');
    if (c >= 0) san_close(c);
    _exit(ok ? 0 : 1);
  }
  const int a = san_accept(lfd, nullptr, nullptr);
  ASSERT_GE(a, 0);
  char b = 0;
  ASSERT_EQ(san_recv(a, &b, 1, 0), 1);
  ASSERT_EQ(san_send(a, &b, 1, MSG_NOSIGNAL), 1);
  // Waiting past the delay with the connection idle: no thread.
  pollfd p{a, POLLIN, 0};
  EXPECT_EQ(san_poll(&p, 1, 100), 0);
  EXPECT_EQ(ThreadCount(), 1);
  EXPECT_TRUE(EchoUntilEof(a));
  EXPECT_EQ(ModeOf(a), SAN_MODE_SHM);
  EXPECT_GT(ThreadCount(), 1);  // ours (ThreadSanitizer adds one of its own with it)
  int status = 0;
  ASSERT_EQ(waitpid(client, &status, 0), client);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int fd : {a, lfd}) EXPECT_EQ(san_close(fd), 0);
}

TEST(ThreadOnDemand, AcceptThenForkServerStaysSingleThreadedAndItsChildrenEcho) {
  uint16_t port = 0;
  const int lfd = SanListenLoopback(&port);
  ASSERT_GE(lfd, 0);
  constexpr int kConnections = 12;
  const pid_t client = ShortClients(port, kConnections, lfd);  // each a round trip
  ASSERT_GE(client, 0);
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
