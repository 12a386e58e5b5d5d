// close_range()/closefrom() in the inetd pattern (compat/interpose_close_range.cc): a child puts
// the accepted connection on fds 0 and 1, closes every other fd with close_range(3, ~0U, 0) as
// openbsd-inetd does, and execs cat (an echo service). The client's bytes must come back and the
// program's own fds in the range must be closed -- on a SAN connection exactly as on a kernel one
// (the oracle). It used to close sanlib's own fds too: the exec hand-off then gave cat a reset
// socket and the client got nothing back. And sanlib's fds placed low (from 1,024) stay while the
// program's around them go.
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "compat/pair.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/open_fds.h"

namespace san::testing_support {
namespace {

class CloseRange : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(CloseRange, InetdChildClosesAllButStdioAndExecsCat) {
  const bool san = std::get<0>(GetParam());
  const bool use_closefrom = std::get<1>(GetParam());
  TcpPair pair;
  MakePair(san, &pair);
  int app_pipe[2];  // one of the program's own fds: the child must close its copy
  ASSERT_EQ(pipe(app_pipe), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(30);
    if (dup2(pair.server, 0) != 0 || dup2(pair.server, 1) != 1) _exit(10);
    if (use_closefrom) {
      closefrom(3);
    } else if (close_range(3, ~0U, 0) != 0) {
      _exit(11);
    }
    execl("/bin/cat", "cat", nullptr);
    _exit(12);
  }
  close(pair.server);
  pair.server = -1;
  close(app_pipe[1]);
  // The child's copy of the write end went with its close_range: EOF, not a wait.
  pollfd p{app_pipe[0], POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);
  char c;
  EXPECT_EQ(read(app_pipe[0], &c, 1), 0) << "the child kept the program's pipe open";
  close(app_pipe[0]);

  const std::string out(100000, 'q');
  std::string in;
  ASSERT_EQ(write(pair.client, out.data(), out.size()), static_cast<ssize_t>(out.size()));
  ASSERT_EQ(shutdown(pair.client, SHUT_WR), 0);
  char buf[65536];
  for (;;) {
    pollfd q{pair.client, POLLIN, 0};
    ASSERT_EQ(poll(&q, 1, 10000), 1) << "no echo after " << in.size() << " bytes";
    const ssize_t n = read(pair.client, buf, sizeof buf);
    ASSERT_GE(n, 0) << strerror(errno) << " after " << in.size() << " bytes";
    if (n == 0) break;
    in.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(in.size(), out.size());
  EXPECT_TRUE(in == out);
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// sanlib's few fds from 1,024 up (common/fd_placement.h, PlaceLow) are not in the high region
// close_range leaves alone: the interposer knows each by number and file. The program's own fds
// among them are closed, and so is a number of ours the program took over (dup2 onto it). Run in
// a child that makes its own SAN listener (its rendezvous fds are placed low) and then closes
// everything from 1,024 up (from 3 up would close the listener, and its rendezvous with it).
TEST_P(CloseRange, KeepsSanlibsLowFdsAndClosesTheProgramsAmongThem) {
  const bool san = std::get<0>(GetParam());
  const bool use_closefrom = std::get<1>(GetParam());
  if (!san) GTEST_SKIP() << "sanlib's fds only";
  if (HighFdBase() < 1024 + 64) GTEST_SKIP() << "RLIMIT_NOFILE leaves no low region";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(30);
    const int listener = LoopbackListener(true);
    const std::vector<int> ours = PlacedLowIn(1024, HighFdBase() - 1);
    if (listener < 0 || ours.size() < 2) _exit(9);
    int app_pipe[2];
    if (pipe(app_pipe) != 0) _exit(10);
    const int mine = fcntl(app_pipe[0], F_DUPFD, 1024);  // the program's, among ours
    const int taken = ours.back();                       // ours, until the program takes it
    if (mine < 1024 || dup2(app_pipe[0], taken) != taken) _exit(10);
    if (use_closefrom) {
      closefrom(1024);
    } else if (close_range(1024, ~0U, 0) != 0) {
      _exit(11);
    }
    if (fcntl(mine, F_GETFD) != -1) _exit(12);   // the program's: closed
    if (fcntl(taken, F_GETFD) != -1) _exit(13);  // the program's now: closed
    for (size_t i = 0; i + 1 < ours.size(); ++i) {
      if (fcntl(ours[i], F_GETFD) == -1) _exit(14);  // sanlib's: kept
    }
    if (fcntl(app_pipe[0], F_GETFD) == -1 || fcntl(listener, F_GETFD) == -1) _exit(15);
    _exit(0);
  }
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "exit " << WEXITSTATUS(status) << " (9: fewer than 2 low fds, 12: the program's fd "
      << "kept, 13: a number the program took from us kept, 14: sanlib's closed, 15: fds below "
      << "the range closed)";
}

// A vfork child (Python's subprocess) closes what it does not keep before its exec, with
// close_range(3, ~0U, 0) or a close() per fd (C loops, older libcs). sanlib's own fds in the high
// region stay in its table (close-on-exec: its exec closes them; exec_handoff.h moves a connection
// it keeps through them), a program's fd up there that is not close-on-exec does not reach the new
// image (close_range marks it close-on-exec, close() closes it), everything below is closed as
// asked, and the parent's fds and connection are untouched.
class CloseRangeVfork : public ::testing::Test {
 protected:
  void SetUp() override {
    const int high = HighFdBase();
    if (high <= 0) GTEST_SKIP() << "RLIMIT_NOFILE leaves no region for sanlib's fds";
    MakePair(true, &pair_);  // a SAN connection: its segment and doorbells are ours, up there
    ASSERT_TRUE(OpenFds(static_cast<unsigned>(high), ~0u, &ours_));
    ASSERT_FALSE(ours_.empty()) << "no fd of sanlib's in its region";
    ASSERT_EQ(pipe(app_pipe_), 0);
    app_high_ = fcntl(app_pipe_[0], F_DUPFD, ours_.back() + 1);  // inheritable, up there
    ASSERT_GT(app_high_, ours_.back()) << strerror(errno);
  }
  void TearDown() override {
    for (int fd : {app_high_, app_pipe_[0], app_pipe_[1]}) {
      if (fd >= 0) close(fd);
    }
  }
  // The child's closes, then its checks; its exit status (-1: it did not exit).
  int RunChild(bool one_by_one) {
    const pid_t child = vfork();
    if (child < 0) return -1;
    if (child == 0) {
      if (one_by_one) {
        for (int fd = 3; fd <= app_high_; ++fd) close(fd);
      } else if (close_range(3, ~0U, 0) != 0) {
        _exit(11);
      }
      if (fcntl(app_pipe_[0], F_GETFD) != -1) _exit(12);
      const int app_flags = fcntl(app_high_, F_GETFD);
      if (app_flags != -1 && !(app_flags & FD_CLOEXEC)) _exit(14);
      for (int fd : ours_) {
        if (fcntl(fd, F_GETFD) == -1) _exit(13);
      }
      _exit(0);
    }
    int status = -1;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  }
  void ExpectParentUntouched() {
    EXPECT_EQ(fcntl(app_high_, F_GETFD), 0);  // open, and still inheritable
    const char byte = 'x';
    char got = 0;
    ASSERT_EQ(write(pair_.client, &byte, 1), 1);
    ASSERT_EQ(read(pair_.server, &got, 1), 1);
    EXPECT_EQ(got, 'x');
  }
  static constexpr const char* kExits =
      " (12: a program's fd kept, 13: sanlib's closed, 14: a program's fd in sanlib's region "
      "would reach the new image)";

  TcpPair pair_;
  std::vector<int> ours_;
  int app_pipe_[2] = {-1, -1};
  int app_high_ = -1;
};

TEST_F(CloseRangeVfork, ClosesTheProgramsFdsAndKeepsOursUntilTheExec) {
  EXPECT_EQ(RunChild(false), 0) << kExits;
  ExpectParentUntouched();
}

TEST_F(CloseRangeVfork, OneByOneClosesKeepOursToo) {
  EXPECT_EQ(RunChild(true), 0) << kExits;
  ExpectParentUntouched();
}

std::string CaseName(const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
  return std::string(std::get<0>(info.param) ? "San" : "Kernel") +
         (std::get<1>(info.param) ? "_closefrom" : "_close_range");
}

INSTANTIATE_TEST_SUITE_P(SanAndKernel, CloseRange,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()), CaseName);

}  // namespace
}  // namespace san::testing_support
