// A server of another user (one that dropped privileges: memcached -u nobody, PostgreSQL,
// rpcbind, vsftpd sessions) and a root client, with the default eager set-up: the shm listener
// refuses the uid and says so (EACCES, not "no SAN listener"); the connection starts on kernel
// TCP with that reason, and once it has lived SAN_UPGRADE_DELAY_US both ends move it to shm, the
// channel proved by the TCP connection itself (late_upgrade.h), bytes intact. Root only.
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "san/san.h"
#include "support/san_loopback.h"

namespace {

using san::testing_support::SanConnectLoopback;
using san::testing_support::SanListenLoopback;

int ModeOf(int fd, std::string* why = nullptr) {
  san_info info{};
  if (san_getinfo(fd, &info) != 0) return -1;
  if (why) *why = info.fallback;
  return info.mode;
}

TEST(OtherUser, RefusedWithTheReasonThenMovedToShmByProof) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to run the server as nobody)";
  const passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  int port_pipe[2], mode_pipe[2];
  ASSERT_EQ(pipe(port_pipe), 0);
  ASSERT_EQ(pipe(mode_pipe), 0);
  const pid_t server = fork();
  ASSERT_GE(server, 0);
  if (server == 0) {
    alarm(30);
    if (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0) _exit(2);
    uint16_t port = 0;
    const int l = SanListenLoopback(&port);
    if (l < 0 || write(port_pipe[1], &port, sizeof port) != sizeof port) _exit(3);
    const int c = san_accept(l, nullptr, nullptr);
    if (c < 0) _exit(4);
    char buf[256];
    for (;;) {
      const ssize_t n = san_recv(c, buf, sizeof buf, 0);
      if (n < 0) _exit(5);
      if (n == 0) break;
      if (san_send(c, buf, static_cast<size_t>(n), 0) != n) _exit(6);
    }
    const char mode = static_cast<char>(ModeOf(c));
    if (write(mode_pipe[1], &mode, 1) != 1) _exit(7);
    san_close(c);
    _exit(0);
  }
  close(port_pipe[1]);
  close(mode_pipe[1]);
  uint16_t port = 0;
  ASSERT_EQ(read(port_pipe[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  const int fd = SanConnectLoopback(port);
  ASSERT_GE(fd, 0);
  std::string why;
  EXPECT_EQ(ModeOf(fd, &why), SAN_MODE_TCP);
  EXPECT_NE(why.find("another user"), std::string::npos) << why;
  // Echoes until the move (SAN_UPGRADE_DELAY_US, 20 ms by default), bounded.
  bool intact = true;
  for (int i = 0; i < 600 && intact && ModeOf(fd) != SAN_MODE_SHM; ++i) {
    char out[32], in[32];
    std::memset(out, 'a' + i % 26, sizeof out);
    intact = san_send(fd, out, sizeof out, 0) == sizeof out &&
             san_recv(fd, in, sizeof in, MSG_WAITALL) == sizeof in &&
             std::memcmp(in, out, sizeof out) == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(intact);
  EXPECT_EQ(ModeOf(fd), SAN_MODE_SHM) << "not moved to shm across users";
  // A few more echoes on shm.
  for (int i = 0; i < 10 && intact; ++i) {
    char out[32], in[32];
    std::memset(out, 'A' + i, sizeof out);
    intact = san_send(fd, out, sizeof out, 0) == sizeof out &&
             san_recv(fd, in, sizeof in, MSG_WAITALL) == sizeof in &&
             std::memcmp(in, out, sizeof out) == 0;
  }
  EXPECT_TRUE(intact);
  san_close(fd);
  char server_mode = 0;
  EXPECT_EQ(read(mode_pipe[0], &server_mode, 1), 1);
  EXPECT_EQ(server_mode, SAN_MODE_SHM) << "the server's end did not move";
  int status = -1;
  ASSERT_EQ(waitpid(server, &status, 0), server);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(port_pipe[0]);
  close(mode_pipe[0]);
}

}  // namespace
