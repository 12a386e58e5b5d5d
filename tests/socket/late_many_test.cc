// Late upgrade of many connections in use at once (socket/late_upgrade.h): every one of a few
// hundred connections between two processes, all in use, moves to shm on both ends, with every
// byte in its place. The lower ends' private rendezvous are not rationed by a fixed number of
// slots (fd_budget.h RoomForLateSide): with 64 slots per process the other lower ends waited
// their turn while their upper ends' dials, refused meanwhile, backed off to a second and more
// apart, and each slot then stayed taken that long (nginx keep-alive -c 1000 moved 30-70 % of
// its connections in 5 s).
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <gtest/gtest.h>

#include "san/san.h"
#include "support/inet.h"
#include "support/late_pair.h"
#include "support/san_loopback.h"

namespace {

// sanlib's own delay and try (late_pair.h sets the tests' shorter ones first): a lower end waiting
// its turn looks again a delay later, as in production.
const bool kDefaultDelays = [] {
  setenv("SAN_UPGRADE_DELAY_US", "20000", 1);
  setenv("SAN_UPGRADE_TRY_MS", "10000", 1);
  return true;
}();

using san::testing_support::SanConnectBounded;
using san::testing_support::SanModeOf;

// The peer process: accepts `n` connections and echoes each byte it reads on any of them, in
// turns, until they all end; exits 0 if every one of its ends was on shm at its EOF.
[[noreturn]] void EchoAll(int lfd, size_t n) {
  alarm(60);
  std::vector<int> fds;
  for (size_t i = 0; i < n; ++i) {
    const int fd = san_accept(lfd, nullptr, nullptr);
    if (fd < 0) _exit(2);
    fds.push_back(fd);
  }
  size_t on_shm = 0;
  for (size_t open = n; open > 0;) {
    for (int& fd : fds) {
      if (fd < 0) continue;
      char c;
      const ssize_t k = san_recv(fd, &c, 1, 0);
      if (k == 1 && san_send(fd, &c, 1, MSG_NOSIGNAL) == 1) continue;
      if (k != 0) _exit(3);
      on_shm += SanModeOf(fd) == SAN_MODE_SHM ? 1 : 0;
      san_close(fd);
      fd = -1;
      --open;
    }
  }
  _exit(on_shm == n ? 0 : 4);
}

// How many connections fit in the fd budget of each process (a quarter of the fd limit for the
// channels at 7 fds each, fd_budget.h kFdsPerChannel: this black-box test sees only the public
// API), with room to spare, after raising the soft limit to the hard one.
size_t ConnectionsThatFit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur == RLIM_INFINITY) return 1000;
  return static_cast<size_t>(limit.rlim_cur / 4 / 7 * 8 / 10);
}

// A SAN socket listening on 127.0.0.1 at a port below the ephemeral range, so that every
// accepted end is its connection's lower end (the lesser port): all the private rendezvous of
// the moves are the accepting process's. Its backlog takes all the connections before the peer
// accepts them (no SYN retried a second later). -1 if no port was free.
int ListenBelowEphemeralPorts(uint16_t* port) {
  uint32_t low = 32768, high = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%u %u", &low, &high) != 2) low = 32768;
    std::fclose(f);
  }
  if (low <= 2048) return -1;
  for (uint32_t k = 0; k < 64; ++k) {
    const int fd = san_socket(AF_INET, SOCK_SAN, 0);
    const uint16_t p = static_cast<uint16_t>(1024 + (getpid() * 131u + k * 977u) % (low - 1024));
    sockaddr_in a = san::testing_support::Loopback(p);
    if (san_bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && san_listen(fd, 1024) == 0) {
      *port = p;
      return fd;
    }
    san_close(fd);
  }
  return -1;
}

TEST(LateMany, HundredsOfConnectionsInUseAllMove) {
  // The peer holds every lower end (ListenBelowEphemeralPorts): several times the 64 slots.
  const size_t n = std::min<size_t>(560, ConnectionsThatFit());
  if (n < 200) GTEST_SKIP() << "the fd limit leaves room for " << n << " channels only";
  uint16_t port = 0;
  const int lfd = ListenBelowEphemeralPorts(&port);
  ASSERT_GE(lfd, 0);
  const pid_t peer = fork();
  ASSERT_GE(peer, 0);
  if (peer == 0) EchoAll(lfd, n);
  std::vector<int> fds;
  for (size_t i = 0; i < n; ++i) {
    fds.push_back(SanConnectBounded(port));
    ASSERT_GE(fds.back(), 0);
  }
  // Rounds of a 1-byte echo on every connection -- all sent, then all read, as an event loop
  // serves many connections at once (wrk against nginx) -- until all are on shm here. They prove
  // themselves by their calls (SAN_UPGRADE_CALLS) in the same round, so all their ends try at
  // once. Bounded: a connection left on TCP fails the test.
  const auto start = std::chrono::steady_clock::now();
  size_t rounds = 0, moved = 0;
  while (moved < n && std::chrono::steady_clock::now() - start < std::chrono::seconds(20)) {
    for (size_t i = 0; i < n; ++i) {
      const char out = static_cast<char>(rounds * 7 + i);
      ASSERT_EQ(san_send(fds[i], &out, 1, MSG_NOSIGNAL), 1) << "connection " << i;
    }
    moved = 0;
    for (size_t i = 0; i < n; ++i) {
      char in = 0;
      ASSERT_EQ(san_recv(fds[i], &in, 1, 0), 1) << "connection " << i;
      ASSERT_EQ(in, static_cast<char>(rounds * 7 + i))
          << "connection " << i << ", round " << rounds;
      moved += SanModeOf(fds[i]) == SAN_MODE_SHM ? 1 : 0;
    }
    ++rounds;
  }
  const auto took = std::chrono::steady_clock::now() - start;
  std::printf(
      "%zu of %zu connections on shm after %zu rounds, %lld ms\n", moved, n, rounds,
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()));
  for (int fd : fds) san_close(fd);
  int status = -1;
  ASSERT_EQ(waitpid(peer, &status, 0), peer);
  san_close(lfd);
  EXPECT_EQ(moved, n) << "connections in use left on kernel TCP";
  // Counted in rounds, not time: each end tries at its first call after it proved itself (about
  // 20 ms in use, or 32 rounds of calls), and a move takes its ends a few calls more. Rationed to
  // 64 sides at once, the last ones took 1,200-3,400 rounds (3.6-6.9 s); now about 25 (0.6 s).
  EXPECT_LE(rounds, 200u) << "moves waited their turn: the peer's sides rationed?";
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the peer's ends: 4 = not all on shm";
}

}  // namespace
