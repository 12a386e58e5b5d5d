// Test support for the late set-up (socket/late_upgrade.h): a connected loopback pair of SAN
// sockets in this process with its ends told apart (the upper end, the greater port, dials the
// lower end's private rendezvous and switches first), and the calls that move it to shm. A test
// program that includes it runs with the late set-up, a 2 ms delay and 400 ms tries (set before
// sanlib reads its configuration, at its first call). Test-only; link with san (or the
// compatibility layer).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <thread>

#include "san/san.h"
#include "support/inet.h"
#include "support/san_loopback.h"

namespace san::testing_support {

inline const bool kLateSetupForTests = [] {
  setenv("SAN_SETUP", "late", 1);
  setenv("SAN_UPGRADE_DELAY_US", "2000", 1);
  setenv("SAN_UPGRADE_TRY_MS", "400", 1);
  return true;
}();

// The socket's mode (SAN_MODE_TCP, SAN_MODE_SHM, ...), or -1 if sanlib does not know it.
inline int SanModeOf(int fd) {
  san_info info{};
  return san_getinfo(fd, &info) == 0 ? info.mode : -1;
}

// SanConnectLoopback with a 10 s SO_RCVTIMEO: a broken move must fail a test, not hang it.
inline int SanConnectBounded(uint16_t port) {
  const int fd = SanConnectLoopback(port);
  timeval bound{10, 0};
  if (fd >= 0) san_setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  return fd;
}

// A listener, a client and the accepted end; `upper` and `lower` name the client and the accepted
// end by their role in a move. All closed with the pair.
struct LatePair {
  int lfd = -1, c = -1, a = -1;
  int upper = -1, lower = -1;
  ~LatePair() {
    for (int fd : {c, a, lfd}) {
      if (fd >= 0) san_close(fd);
    }
  }
};

inline void MakeLatePair(LatePair* m) {
  uint16_t port = 0;
  m->lfd = SanListenLoopback(&port);
  ASSERT_GE(m->lfd, 0);
  m->c = SanConnectBounded(port);
  ASSERT_GE(m->c, 0);
  m->a = san_accept(m->lfd, nullptr, nullptr);
  ASSERT_GE(m->a, 0);
  sockaddr_in local{};
  socklen_t len = sizeof local;
  ASSERT_EQ(san_getsockname(m->c, reinterpret_cast<sockaddr*>(&local), &len), 0);
  const bool client_upper = ntohs(local.sin_port) > port;
  m->upper = client_upper ? m->c : m->a;
  m->lower = client_upper ? m->a : m->c;
}

// Makes data calls on the upper end of a connection, 0.5 ms apart, until it has switched (it
// reaches the lower end's private rendezvous in one of them); false if it never did. `lower`, if
// given (its end in this process), is called on too, with MSG_PEEK (its bytes stay for the test).
// Both ends try once in use for the delay, their calls never that far apart (late_upgrade.h): an
// end left alone makes no try.
inline bool DriveUpperEndToShm(int upper, int lower = -1, int max_calls = 4000) {
  for (int i = 0; i < max_calls && SanModeOf(upper) != SAN_MODE_SHM; ++i) {
    char unused;
    san_recv(upper, &unused, 1, MSG_DONTWAIT);
    if (lower >= 0) san_recv(lower, &unused, 1, MSG_DONTWAIT | MSG_PEEK);
    if (SanModeOf(upper) != SAN_MODE_SHM) {
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  }
  return SanModeOf(upper) == SAN_MODE_SHM;
}

// A thread asleep on the upper end of a new pair (`wait_readable(fd, timeout_ms)`: 1 once
// readable) while the calling thread's calls move it: the upper end switches first and gets no
// wake byte on its kernel socket, so nothing of the kernel's wakes the sleeper. The move's kick
// (socket/late_kick.h) must, or the lower end's message over shm is never reported.
inline void CheckSleeperIsWokenByAMove(const std::function<int(int fd, int timeout_ms)>& wait) {
  LatePair m;
  ASSERT_NO_FATAL_FAILURE(MakeLatePair(&m));
  ASSERT_EQ(SanModeOf(m.upper), SAN_MODE_TCP);
  int reported = -2;
  std::chrono::steady_clock::time_point woke;
  std::thread sleeper([&] {
    reported = wait(m.upper, 5000);
    woke = std::chrono::steady_clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // asleep, and past the delay
  const bool moved = DriveUpperEndToShm(m.upper, m.lower);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the sleeper looks again
  const auto sent_at = std::chrono::steady_clock::now();
  const bool sent = san_send(m.lower, "k", 1, 0) == 1;
  sleeper.join();
  ASSERT_TRUE(moved);
  ASSERT_TRUE(sent);
  ASSERT_EQ(reported, 1) << "the sleeper was not woken by the move";
  // Not a timing test: a sleeper nobody woke reports the message only when its 5 s are up.
  EXPECT_LT(woke - sent_at, std::chrono::milliseconds(2500)) << "woken by its timeout";
  char c = 0;
  EXPECT_EQ(san_recv(m.upper, &c, 1, MSG_DONTWAIT), 1);
  EXPECT_EQ(c, 'k');
  EXPECT_EQ(SanModeOf(m.upper), SAN_MODE_SHM);
  EXPECT_EQ(SanModeOf(m.lower), SAN_MODE_SHM);
}

}  // namespace san::testing_support
