#include "sanlib/common/fd_placement.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

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

}  // namespace
}  // namespace san
