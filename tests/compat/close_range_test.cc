// close_range()/closefrom() in the inetd pattern (compat/interpose_close_range.cc): a child puts
// the accepted connection on fds 0 and 1, closes every other fd with close_range(3, ~0U, 0) as
// openbsd-inetd does, and execs cat (an echo service). The client's bytes must come back and the
// program's own fds in the range must be closed -- on a SAN connection exactly as on a kernel one
// (the oracle). It used to close sanlib's own fds too: the exec hand-off then gave cat a reset
// socket and the client got nothing back.
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "compat/pair.h"

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

std::string CaseName(const ::testing::TestParamInfo<std::tuple<bool, bool>>& info) {
  return std::string(std::get<0>(info.param) ? "San" : "Kernel") +
         (std::get<1>(info.param) ? "_closefrom" : "_close_range");
}

INSTANTIATE_TEST_SUITE_P(SanAndKernel, CloseRange,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()), CaseName);

}  // namespace
}  // namespace san::testing_support
