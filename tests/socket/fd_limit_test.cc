// A process that lowers RLIMIT_NOFILE below the fds sanlib's sleep watches (vsftpd's sessions set
// it to 0 after chroot) must still block on a SAN socket and wake for its data: poll() refuses
// more fds than the limit (EINVAL) and no wake-up fd can be made (EMFILE), so the wait naps
// instead (socket/wait.cc). It used to fail the blocking recv with EINVAL -- vsftpd answered
// "500 OOPS: vsf_sysutil_recv_peek" to every login once the machine was busy.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "san/san.h"
#include "support/san_loopback.h"

namespace {

using san::testing_support::SanConnectLoopback;
using san::testing_support::SanListenLoopback;

TEST(FdLimit, BlockingRecvWithNoFdsLeftStillWakesForData) {
  uint16_t port = 0;
  const int l = SanListenLoopback(&port);
  ASSERT_GE(l, 0);
  const int c = SanConnectLoopback(port);
  ASSERT_GE(c, 0);
  const int s = san_accept(l, nullptr, nullptr);
  ASSERT_GE(s, 0);
  san_info info{};
  ASSERT_EQ(san_getinfo(s, &info), 0);
  ASSERT_EQ(info.mode, SAN_MODE_SHM);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(20);
    const rlimit none{0, 0};
    if (setrlimit(RLIMIT_NOFILE, &none) != 0) _exit(2);
    char buf[16] = {};
    // Blocks well past the spin: the parent sends after 200 ms.
    const ssize_t n = san_recv(s, buf, sizeof buf, MSG_PEEK);
    if (n != 5) _exit(n < 0 ? 100 + errno % 100 : 3);
    if (san_recv(s, buf, sizeof buf, 0) != 5 || std::memcmp(buf, "hello", 5) != 0) _exit(4);
    if (san_send(s, "world", 5, 0) != 5) _exit(5);
    _exit(0);
  }
  timeval bound{10, 0};  // the child's failure must fail the test, not hang it
  san_setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_EQ(san_send(c, "hello", 5, 0), 5);
  char back[5];
  EXPECT_EQ(san_recv(c, back, sizeof back, MSG_WAITALL), 5);
  EXPECT_EQ(std::memcmp(back, "world", 5), 0);
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child exit " << WEXITSTATUS(status) << " (100+errno: the blocking recv failed)";
  san_close(s);
  san_close(c);
  san_close(l);
}

}  // namespace
