#include "sanlib/common/open_fds.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace san {
namespace {

// Three fds at known numbers, far above what the test process holds otherwise: a range lists
// exactly those inside it (the listing stops past the range's end), and an open range all.
TEST(OpenFds, ListsExactlyTheFdsInTheRange) {
  const int base = fcntl(0, F_DUPFD_CLOEXEC, 700);
  ASSERT_GE(base, 700);
  const int mid = fcntl(0, F_DUPFD_CLOEXEC, base + 100);
  const int top = fcntl(0, F_DUPFD_CLOEXEC, base + 200);
  ASSERT_EQ(mid, base + 100);
  ASSERT_EQ(top, base + 200);
  std::vector<int> got;
  ASSERT_TRUE(OpenFds(static_cast<unsigned>(base + 1), static_cast<unsigned>(base + 150), &got));
  EXPECT_EQ(got, std::vector<int>{mid});
  got.clear();
  ASSERT_TRUE(OpenFds(static_cast<unsigned>(base), static_cast<unsigned>(base), &got));
  EXPECT_EQ(got, std::vector<int>{base});
  got.clear();
  ASSERT_TRUE(OpenFds(0, ~0u, &got));
  for (int fd : {0, base, mid, top}) {
    EXPECT_NE(std::find(got.begin(), got.end(), fd), got.end()) << fd;
  }
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  got.clear();
  ASSERT_TRUE(OpenFds(static_cast<unsigned>(top + 1), ~0u, &got));
  EXPECT_TRUE(got.empty() || got.front() > top);
  close(base);
  close(mid);
  close(top);
}

}  // namespace
}  // namespace san
