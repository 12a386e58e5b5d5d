// OpenSides (socket/open_sides.h): the shared table of late moves' open private rendezvous is
// seen across processes, refuses files it must not trust, and answers kUnknown rather than
// "closed" once sides no longer fit in it.
#include "sanlib/socket/open_sides.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace san {
namespace {

using Presence = OpenSides::Presence;

class OpenSidesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "/sanlib-open-sides-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    shm_unlink(name_.c_str());
  }
  void TearDown() override { shm_unlink(name_.c_str()); }
  // A file under the table's name made beforehand, as another program could.
  void MakeFile(mode_t mode, off_t size) {
    const int fd = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_EXCL, mode);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(fchmod(fd, mode), 0);  // past the umask
    ASSERT_EQ(ftruncate(fd, size), 0);
    close(fd);
  }
  std::string name_;
};

TEST_F(OpenSidesTest, AnnouncedSideIsOpenUntilWithdrawn) {
  OpenSides sides(name_);
  ASSERT_TRUE(sides.usable());
  EXPECT_EQ(sides.Look(42), Presence::kClosed);
  EXPECT_TRUE(sides.Announce(42));
  EXPECT_EQ(sides.Look(42), Presence::kOpen);
  EXPECT_EQ(sides.Look(43), Presence::kClosed);
  EXPECT_TRUE(sides.Announce(0));  // no key is refused, 0 included
  EXPECT_EQ(sides.Look(0), Presence::kOpen);
  sides.Withdraw(42);
  sides.Withdraw(0);
  EXPECT_EQ(sides.Look(42), Presence::kClosed);
  EXPECT_EQ(sides.Look(0), Presence::kClosed);
}

TEST_F(OpenSidesTest, AnotherProcessSeesTheSideAndItsWithdrawal) {
  OpenSides sides(name_);
  ASSERT_TRUE(sides.usable());
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // A process of its own that opens the table by name, as the peer process does.
    OpenSides own(name_);
    char c = 0;
    if (!own.usable() || !own.Announce(7)) _exit(1);
    if (write(to_parent[1], "a", 1) != 1 || read(to_child[0], &c, 1) != 1) _exit(2);
    own.Withdraw(7);
    if (write(to_parent[1], "w", 1) != 1) _exit(3);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  EXPECT_EQ(sides.Look(7), Presence::kOpen);
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  ASSERT_EQ(read(to_parent[0], &c, 1), 1);
  EXPECT_EQ(sides.Look(7), Presence::kClosed);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(OpenSidesTest, SidesBeyondTheProbeWindowMakeLooksUnknown) {
  OpenSides sides(name_);
  ASSERT_TRUE(sides.usable());
  // Keys with the same home slot: the window holds kProbe of them, the next is only counted.
  for (uint64_t i = 0; i <= OpenSides::kProbe; ++i) {
    ASSERT_TRUE(sides.Announce(5 + i * OpenSides::kSlots));
  }
  const uint64_t last = 5 + uint64_t{OpenSides::kProbe} * OpenSides::kSlots;
  // Counted, not recorded: no look may say "closed" now, for it or for any other key.
  EXPECT_EQ(sides.Look(last), Presence::kUnknown);
  EXPECT_EQ(sides.Look(99), Presence::kUnknown);
  EXPECT_EQ(sides.Look(5), Presence::kOpen);
  sides.Withdraw(last);
  EXPECT_EQ(sides.Look(99), Presence::kClosed);
  for (uint64_t i = 0; i < OpenSides::kProbe; ++i) sides.Withdraw(5 + i * OpenSides::kSlots);
  EXPECT_EQ(sides.Look(5), Presence::kClosed);
}

TEST_F(OpenSidesTest, AFileOthersMayWriteIsNotUsed) {
  MakeFile(0666, 0);
  OpenSides sides(name_);
  EXPECT_FALSE(sides.usable());
  EXPECT_FALSE(sides.Announce(1));
  EXPECT_EQ(sides.Look(1), Presence::kUnknown);
}

TEST_F(OpenSidesTest, AFileOfAnotherSizeIsNotUsed) {
  MakeFile(0600, 4096);
  OpenSides sides(name_);
  EXPECT_FALSE(sides.usable());
  EXPECT_EQ(sides.Look(1), Presence::kUnknown);
}

TEST_F(OpenSidesTest, AFileWithAnotherMagicIsNotUsed) {
  {
    OpenSides first(name_);
    ASSERT_TRUE(first.usable());
  }
  const int fd = shm_open(name_.c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  const uint64_t junk = 0x0123456789abcdefull;
  ASSERT_EQ(pwrite(fd, &junk, sizeof junk, 0), static_cast<ssize_t>(sizeof junk));
  close(fd);
  OpenSides sides(name_);
  EXPECT_FALSE(sides.usable());
}

}  // namespace
}  // namespace san
