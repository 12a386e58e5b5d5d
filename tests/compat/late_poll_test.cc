// poll() and select() of an unmodified program on late candidates (socket/late_upgrade.h): they go
// through sanlib's poll (socket/poll.cc) as they do for SAN sockets, so that a move another thread
// makes while the program sleeps ends its sleep (late_kick.h), and a switching peer's wake byte
// alone is no readiness. They used to go to the kernel whenever no fd was on shm yet: a poller
// asleep on a candidate that moved meanwhile never heard of the peer's next message.
#include <errno.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "san/san.h"
#include "support/late_pair.h"

namespace {

using san::testing_support::DriveUpperEndToShm;
using san::testing_support::LatePair;
using san::testing_support::MakeLatePair;
using san::testing_support::SanModeOf;

// Waits up to `timeout_ms` for `fd` to be readable with the interposed poll() (`use_poll`) or
// select(): what the call returned (1: readable).
int WaitReadable(bool use_poll, int fd, int timeout_ms) {
  if (use_poll) {
    pollfd p{fd, POLLIN, 0};
    const int n = poll(&p, 1, timeout_ms);
    return n == 1 && !(p.revents & POLLIN) ? -1 : n;
  }
  fd_set r;
  FD_ZERO(&r);
  FD_SET(fd, &r);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  const int n = select(fd + 1, &r, nullptr, nullptr, &tv);
  return n == 1 && !FD_ISSET(fd, &r) ? -1 : n;
}

class LatePoll : public ::testing::TestWithParam<bool> {};  // true: poll, false: select
INSTANTIATE_TEST_SUITE_P(Calls, LatePoll, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "Poll" : "Select");
                         });

// A thread asleep in poll() or select() on a candidate another thread moves is woken.
TEST_P(LatePoll, SleeperIsWokenWhenAnotherThreadMovesItsCandidate) {
  san::testing_support::CheckSleeperIsWokenByAMove(
      [p = GetParam()](int fd, int timeout_ms) { return WaitReadable(p, fd, timeout_ms); });
}

// The lower end's kernel socket holds the upper end's wake byte once the upper end switched: that
// readiness is the move's, not the program's (a nonblocking read after it got EAGAIN).
TEST_P(LatePoll, PeersWakeByteAloneIsNoReadiness) {
  LatePair m;
  ASSERT_NO_FATAL_FAILURE(MakeLatePair(&m));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the delay
  ASSERT_TRUE(DriveUpperEndToShm(m.upper, m.lower));
  EXPECT_EQ(WaitReadable(GetParam(), m.lower, 100), 0);
  char got = 0;
  errno = 0;
  EXPECT_EQ(recv(m.lower, &got, 1, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
  ASSERT_EQ(send(m.upper, "z", 1, 0), 1);
  EXPECT_EQ(WaitReadable(GetParam(), m.lower, 5000), 1);
  EXPECT_EQ(recv(m.lower, &got, 1, MSG_DONTWAIT), 1);
  EXPECT_EQ(got, 'z');
  EXPECT_EQ(SanModeOf(m.lower), SAN_MODE_SHM);
}

}  // namespace
