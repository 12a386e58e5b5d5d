// The exec hand-off of a vfork child (socket/exec_handoff.h): the child runs in this process's
// memory with its own fd table, and what it inherits is also ours. A late candidate it inherits
// (kernel TCP, not moved yet) must stay TCP for good: this process cannot count the new image
// among the connection's holders, and a move to shm under it would leave the image reading a
// kernel socket the peer no longer writes to. The python-level cases (a connection on shm moved to
// kernel TCP for the child, a fork-shared one refused) are in tests/compat/exec_test.cc.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "sanlib/socket/exec_handoff.h"
#include "support/late_pair.h"

namespace {

using san::testing_support::DriveUpperEndToShm;
using san::testing_support::LatePair;
using san::testing_support::MakeLatePair;
using san::testing_support::SanModeOf;

TEST(VforkHandoff, InheritedLateCandidateStaysOnTcpForGood) {
  LatePair m;
  ASSERT_NO_FATAL_FAILURE(MakeLatePair(&m));
  ASSERT_EQ(SanModeOf(m.lower), SAN_MODE_TCP);
  // As python's subprocess does with a connection given as stdin: dup2 onto 0, then exec (the
  // hand-off only: the child leaves with _exit).
  const pid_t child = vfork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (dup2(m.lower, 0) != 0) _exit(10);
    const std::unique_ptr<san::ExecHandoff> h = san::ExecHandoff::Prepare(false);
    _exit(h ? 11 : 0);
  }
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "exit " << WEXITSTATUS(status);
  san_info info{};
  ASSERT_EQ(san_getinfo(m.lower, &info), 0);
  EXPECT_EQ(info.mode, SAN_MODE_TCP);
  EXPECT_NE(std::string(info.fallback).find("vfork child"), std::string::npos) << info.fallback;
  // What moves an unmarked pair (DriveUpperEndToShm moves one within its calls: late_pair.h) does
  // not move this one, and the bytes still go through, over TCP.
  EXPECT_FALSE(DriveUpperEndToShm(m.upper, m.lower, 400));
  EXPECT_EQ(SanModeOf(m.lower), SAN_MODE_TCP);
  for (int i = 0; i < 50; ++i) {
    char c = static_cast<char>(i);
    ASSERT_EQ(san_send(m.upper, &c, 1, 0), 1);
    char got = 0;
    ASSERT_EQ(san_recv(m.lower, &got, 1, 0), 1);
    ASSERT_EQ(got, c);
  }
}

// The same pair unmarked moves within those calls: what the test above relies on.
TEST(VforkHandoff, AnUnmarkedPairMovesWithinTheDrive) {
  LatePair m;
  ASSERT_NO_FATAL_FAILURE(MakeLatePair(&m));
  EXPECT_TRUE(DriveUpperEndToShm(m.upper, m.lower));
}

}  // namespace
