#include "sanlib/common/fd_placement.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "sanlib/common/small_file.h"
#include "sanlib/common/unique_fd.h"

namespace san {
namespace {

TEST(FdPlacement, RegionIsTheTopQuarterUpToAFixedStart) {
  EXPECT_EQ(HighFdBaseFor(RLIM_INFINITY), -1);
  EXPECT_EQ(HighFdBaseFor(1023), -1);  // too few fds to set any apart
  EXPECT_EQ(HighFdBaseFor(1024), 768);
  EXPECT_EQ(HighFdBaseFor(4096), 3072);
  EXPECT_EQ(HighFdBaseFor(20000), 15000);
  EXPECT_EQ(HighFdBaseFor(21845), 16384);  // the top quarter would start at 16,384.25 -> 16,384
  // Above that the start stays put: fork() copies the fd table up to the highest open fd.
  EXPECT_EQ(HighFdBaseFor(65536), 16384);
  EXPECT_EQ(HighFdBaseFor(524288), 16384);
  EXPECT_EQ(HighFdBaseFor(1048576), 16384);
  EXPECT_EQ(HighFdBaseFor(rlim_t{1} << 40), 16384);
}

TEST(FdPlacement, PlaceHighMovesAnFdIntoTheRegionCloseOnExec) {
  const int base = HighFdBase();
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(base, HighFdBaseFor(limit.rlim_cur));
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const int low = pipe_fds[0];
  const int moved = PlaceHigh(low);
  if (base < 0) {
    EXPECT_EQ(moved, low);  // no region: it stays
  } else {
    EXPECT_GE(moved, base);
    EXPECT_EQ(fcntl(low, F_GETFD), -1) << "the low fd is closed";
    EXPECT_NE(fcntl(moved, F_GETFD) & FD_CLOEXEC, 0);
    // The same pipe: what goes in at the write end comes out of the moved read end.
    ASSERT_EQ(write(pipe_fds[1], "x", 1), 1);
    char c = 0;
    EXPECT_EQ(read(moved, &c, 1), 1);
    EXPECT_EQ(c, 'x');
  }
  close(moved);
  close(pipe_fds[1]);
}

TEST(FdPlacement, PlaceLowPutsAFewFromTheSelectLimitUpAndKnowsThem) {
  const int base = HighFdBase();
  if (base < 1024 + 64) GTEST_SKIP() << "RLIMIT_NOFILE leaves no low region";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const int low = PlaceLow(pipe_fds[0]);
  EXPECT_GE(low, 1024);
  EXPECT_LT(low, base);
  EXPECT_EQ(fcntl(pipe_fds[0], F_GETFD), -1) << "the original number is closed";
  EXPECT_NE(fcntl(low, F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_TRUE(IsPlacedLow(low));
  EXPECT_FALSE(IsPlacedLow(pipe_fds[1])) << "not placed";
  const std::vector<int> listed = PlacedLowIn(1024, base - 1);
  EXPECT_NE(std::find(listed.begin(), listed.end(), low), listed.end());
  // The program takes the number over (dup2 onto it, behind our back): no longer ours. (Not with
  // the pipe's other end: both ends are one inode.)
  const int other = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(other, 0);
  ASSERT_EQ(dup2(other, low), low);
  EXPECT_FALSE(IsPlacedLow(low));
  close(low);
  close(other);
  close(pipe_fds[1]);
}

TEST(FdPlacement, PlaceLowHoldsAtMost64AndSendsTheRestHigh) {
  const int base = HighFdBase();
  if (base < 1024 + 64) GTEST_SKIP() << "RLIMIT_NOFILE leaves no low region";
  std::vector<int> placed;
  for (int i = 0; i < 80; ++i) {
    int fd = PlaceLow(dup(0));
    ASSERT_GE(fd, 0);
    placed.push_back(fd);
  }
  const auto low = std::count_if(placed.begin(), placed.end(), [&](int fd) { return fd < base; });
  EXPECT_LE(low, 64);
  EXPECT_GE(std::count_if(placed.begin(), placed.end(), [&](int fd) { return fd >= base; }),
            80 - 64);
  for (int fd : placed) close(fd);
  // Closed ones free their places: the next goes low again.
  const int again = PlaceLow(dup(0));
  EXPECT_GE(again, 1024);
  EXPECT_LT(again, base);
  close(again);
}

TEST(FdPlacement, AnFdOfOursClosedBySanlibIsForgottenAtOnce) {
  const int base = HighFdBase();
  if (base < 1024 + 64) GTEST_SKIP() << "RLIMIT_NOFILE leaves no low region";
  UniqueFd ours(PlaceLow(eventfd(0, EFD_CLOEXEC)));
  const int number = ours.get();
  ASSERT_GE(number, 1024);
  ASSERT_LT(number, base);
  EXPECT_TRUE(IsPlacedLow(number));
  ours.reset();  // KernelClose
  // The program's own eventfd at that number: all eventfds share one inode, so only the record
  // dropped at our close tells it from ours.
  const int raw = eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(raw, 0);
  const int theirs = fcntl(raw, F_DUPFD_CLOEXEC, number);
  close(raw);
  ASSERT_EQ(theirs, number) << "the lowest free number from there on";
  EXPECT_FALSE(IsPlacedLow(theirs));
  const std::vector<int> listed = PlacedLowIn(number, number);
  EXPECT_TRUE(listed.empty());
  close(theirs);
}

// FDSize in /proc/self/status: how many fds the process's table holds now.
long FdTableSize() {
  std::string status;
  if (!ReadSmallFile("/proc/self/status", &status)) return -1;
  const size_t at = status.find("FDSize:");
  return at == std::string::npos ? -1 : std::strtol(status.c_str() + at + 7, nullptr, 10);
}

void* Idle(void*) {
  for (;;) pause();
  return nullptr;
}

// In a fresh child (one thread, its table as small as its open fds): grown to the high region
// alone; left as it is once another thread shares it (growing it then waits for an RCU grace
// period, which the call must not impose on a program that may never place an fd high).
TEST(FdPlacement, GrowFdTableWhileAloneGrowsOnlyASingleThreadedProcess) {
  const int base = HighFdBase();
  if (base < 1024 + 64) GTEST_SKIP() << "RLIMIT_NOFILE leaves no high region";
  for (const bool with_thread : {false, true}) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      if (with_thread) {
        pthread_t t;
        if (pthread_create(&t, nullptr, &Idle, nullptr) != 0) _exit(10);
      }
      const long before = FdTableSize();
      if (before <= 0) _exit(11);
      if (before > base) _exit(12);  // grown already: nothing to tell
      GrowFdTableWhileAlone();
      const long after = FdTableSize();
      if (with_thread) _exit(after == before ? 0 : 13);
      _exit(after > base ? 0 : 14);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << (with_thread ? "with a second thread" : "alone")
                                      << " (11: no FDSize, 12: grown already, 13: grown with a "
                                         "thread, 14: not grown alone)";
  }
}

}  // namespace
}  // namespace san
