// A server of another user (one that dropped privileges: memcached -u nobody, PostgreSQL,
// rpcbind, vsftpd sessions) and a root client, with the default eager set-up: the shm listener
// refuses the uid and says so (EACCES, not "no SAN listener"); the connection starts on kernel
// TCP with that reason, and once it has lived SAN_UPGRADE_DELAY_US both ends move it to shm, the
// channel proved by the TCP connection itself (late_upgrade.h), bytes intact. Then SAN_PEER_USERS
// (common/peer_users.h): each end in a process of its own (this binary re-executed with the
// policy in its environment), the server as nobody, the client root: a policy that refuses keeps
// the connection kernel TCP on both ends with the true reason, one that allows lets it move.
// Root only.
#include <pwd.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

// A server child's echo loop: everything back until EOF (exits 5/6 on an error).
void EchoUntilEof(int c) {
  char buf[256];
  for (;;) {
    const ssize_t n = san_recv(c, buf, sizeof buf, 0);
    if (n < 0) _exit(5);
    if (n == 0) return;
    if (san_send(c, buf, static_cast<size_t>(n), 0) != n) _exit(6);
  }
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
    EchoUntilEof(c);
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

// --- SAN_PEER_USERS: one process per end ---

constexpr char kRoleVar[] = "SAN_TEST_PEER_ROLE";  // server | client
constexpr char kOutVar[] = "SAN_TEST_PEER_OUT";    // fd the role writes its lines to
constexpr char kPortVar[] = "SAN_TEST_PEER_PORT";  // the client's server

bool Echo(int fd, int i) {
  char out[32], in[32];
  std::memset(out, 'a' + i % 26, sizeof out);
  return san_send(fd, out, sizeof out, 0) == sizeof out &&
         san_recv(fd, in, sizeof in, MSG_WAITALL) == sizeof in &&
         std::memcmp(in, out, sizeof out) == 0;
}

void WriteLine(int out, const std::string& line) {
  const std::string l = line + "\n";
  if (write(out, l.data(), l.size()) != static_cast<ssize_t>(l.size())) _exit(9);
}

// "mode<TAB>reason" of a connected socket.
std::string ModeLine(int fd) {
  std::string why;
  const int mode = ModeOf(fd, &why);
  return std::to_string(mode) + "\t" + why;
}

// The role this process was started for (by RunEnds), or skipped.
TEST(OtherUserPolicy, Role) {
  const char* role = getenv(kRoleVar);
  if (!role) GTEST_SKIP() << "run by the other cases as a child";
  alarm(60);
  const int out = atoi(getenv(kOutVar));
  if (strcmp(role, "server") == 0) {
    const passwd* nobody = getpwnam("nobody");
    if (!nobody || setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0) _exit(2);
    uint16_t port = 0;
    const int l = SanListenLoopback(&port);
    if (l < 0) _exit(3);
    WriteLine(out, std::to_string(port));
    const int c = san_accept(l, nullptr, nullptr);
    if (c < 0) _exit(4);
    EchoUntilEof(c);
    WriteLine(out, ModeLine(c));
    san_close(c);
    _exit(0);
  }
  const int fd = SanConnectLoopback(static_cast<uint16_t>(atoi(getenv(kPortVar))));
  if (fd < 0) _exit(3);
  // 300 ms of echoes, 5 ms apart (past SAN_UPGRADE_DELAY_US, 20 ms), then 10 more once on shm.
  int i = 0;
  for (; i < 60 && ModeOf(fd) != SAN_MODE_SHM; ++i) {
    if (!Echo(fd, i)) _exit(4);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int j = 0; j < 10; ++j) {
    if (!Echo(fd, i + j)) _exit(5);
  }
  WriteLine(out, ModeLine(fd));
  san_close(fd);
  _exit(0);
}

// This binary again, as `role`, with `env` added; its lines come on the returned pipe.
pid_t StartRole(const char* role, const std::vector<std::pair<std::string, std::string>>& env,
                FILE** lines) {
  int p[2];
  if (pipe(p) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    if (!freopen("/dev/null", "w", stdout)) _exit(126);  // gtest's own lines
    setenv(kRoleVar, role, 1);
    setenv(kOutVar, std::to_string(p[1]).c_str(), 1);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    execl("/proc/self/exe", "other_user_test", "--gtest_filter=OtherUserPolicy.Role", nullptr);
    _exit(127);
  }
  close(p[1]);
  *lines = fdopen(p[0], "r");
  return pid;
}

std::string ReadLine(FILE* f) {
  char buf[512] = {};
  if (!fgets(buf, sizeof buf, f)) return "";
  std::string line(buf);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

struct Ends {
  std::string server;  // "mode<TAB>reason" at the end
  std::string client;
};

// A server as nobody and a root client, each with its own SAN_PEER_USERS (unset if empty).
Ends RunEnds(const std::string& server_policy, const std::string& client_policy,
             const std::string& setup) {
  std::vector<std::pair<std::string, std::string>> server_env{{"SAN_SETUP", setup}},
      client_env{{"SAN_SETUP", setup}};
  if (!server_policy.empty()) server_env.emplace_back("SAN_PEER_USERS", server_policy);
  if (!client_policy.empty()) client_env.emplace_back("SAN_PEER_USERS", client_policy);
  Ends ends;
  FILE* server_out = nullptr;
  FILE* client_out = nullptr;
  const pid_t server = StartRole("server", server_env, &server_out);
  EXPECT_GT(server, 0);
  if (server <= 0) return ends;
  const std::string port = ReadLine(server_out);
  EXPECT_FALSE(port.empty()) << "the server never listened";
  client_env.emplace_back(kPortVar, port);
  const pid_t client = StartRole("client", client_env, &client_out);
  ends.client = ReadLine(client_out);
  ends.server = ReadLine(server_out);
  for (const pid_t pid : {client, server}) {
    int status = -1;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << (pid == server ? "server" : "client") << " status " << status;
  }
  fclose(server_out);
  fclose(client_out);
  return ends;
}

const std::string kTcp = std::to_string(SAN_MODE_TCP) + "\t";
const std::string kShm = std::to_string(SAN_MODE_SHM) + "\t";

TEST(OtherUserPolicy, SameOnBothEndsKeepsKernelTcpWithTheReasonOnBoth) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to run the server as nobody)";
  const std::string nobody = std::to_string(getpwnam("nobody")->pw_uid);
  // sanrun's default set-up: the connection starts on TCP, and each end refuses the move.
  const Ends ends = RunEnds("same", "same", "late");
  EXPECT_EQ(ends.client,
            kTcp + "move failed: SAN_PEER_USERS=same does not allow the peer's user (uid " +
                nobody + ")");
  EXPECT_EQ(ends.server,
            kTcp + "move failed: SAN_PEER_USERS=same does not allow the peer's user (uid 0)");
}

TEST(OtherUserPolicy, AServerThatAllowsItsClientsUserMoves) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to run the server as nobody)";
  const Ends ends = RunEnds("root,daemon", "", "eager");
  EXPECT_EQ(ends.client, kShm);
  EXPECT_EQ(ends.server, kShm);
  const Ends by_group = RunEnds("@root", "nobody", "late");
  EXPECT_EQ(by_group.client, kShm);
  EXPECT_EQ(by_group.server, kShm);
}

TEST(OtherUserPolicy, AServerThatRefusesKeepsBothEndsOnTcp) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to run the server as nobody)";
  const Ends ends = RunEnds("daemon,@users", "", "eager");
  EXPECT_EQ(ends.server, kTcp + "move failed: SAN_PEER_USERS=daemon,@users does not allow the "
                                "peer's user (uid 0)");
  // The client allows anyone; it is still waiting for a peer that never comes (its reason
  // changes when it gives up, seconds later): kernel TCP all the same, bytes intact.
  EXPECT_EQ(ends.client.substr(0, kTcp.size()), kTcp) << ends.client;
}

}  // namespace
