// Where sanlib's log lines go (common/log.h): never into a network socket on fd 2 (under inetd
// and in vsftpd's sessions that is the client's connection), into SAN_LOG_FILE when given, and to
// fd 2 otherwise. The end-to-end cases run this binary again as a child with fd 2 set up by the
// test (a fresh process: the configuration is read once per process).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "sanlib/common/log.h"

namespace san {
namespace {

constexpr char kChildVar[] = "SAN_LOG_TEST_CHILD";
constexpr char kMessage[] = "a line from the child";

// A connected loopback TCP pair (client, server).
bool TcpPair(int* client, int* server) {
  const int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 1) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return false;
  }
  *client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool ok = connect(*client, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  (*server = accept4(l, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;
  close(l);
  return ok;
}

std::string Drain(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// Runs this binary's ChildLogsOneLine case with `fd2` as its fd 2 and `log_file` as SAN_LOG_FILE
// (unset if empty); returns its exit status.
int RunChild(int fd2, const std::string& log_file) {
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd2, STDERR_FILENO);
    setenv(kChildVar, "1", 1);
    setenv("SAN_LOG", "info", 1);
    if (log_file.empty()) {
      unsetenv("SAN_LOG_FILE");
    } else {
      setenv("SAN_LOG_FILE", log_file.c_str(), 1);
    }
    execl("/proc/self/exe", "log_test", "--gtest_filter=Log.ChildLogsOneLine", nullptr);
    _exit(127);
  }
  int status = -1;
  waitpid(pid, &status, 0);
  return status;
}

// Only in the child RunChild starts (skipped in a normal run).
TEST(Log, ChildLogsOneLine) {
  if (!getenv(kChildVar)) GTEST_SKIP() << "run by the other cases as a child";
  SAN_LOG_WARN("%s", kMessage);
}

TEST(Log, SinkFollowsTheSettingAndWhatFd2Is) {
  int client = -1, server = -1;
  ASSERT_TRUE(TcpPair(&client, &server));
  int p[2], u[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, u), 0);
  EXPECT_EQ(ChooseLogSink("", client), LogSink::kSyslog);  // a peer would read it
  EXPECT_EQ(ChooseLogSink("", p[1]), LogSink::kFd2);
  EXPECT_EQ(ChooseLogSink("", u[0]), LogSink::kFd2);          // journald's stream is AF_UNIX
  EXPECT_EQ(ChooseLogSink("", 1000000), LogSink::kFd2);       // closed: the write fails harmlessly
  EXPECT_EQ(ChooseLogSink("stderr", client), LogSink::kFd2);  // asked for
  EXPECT_EQ(ChooseLogSink("none", p[1]), LogSink::kNone);
  EXPECT_EQ(ChooseLogSink("syslog", p[1]), LogSink::kSyslog);
  EXPECT_EQ(ChooseLogSink("/tmp/x.log", client), LogSink::kFile);
  for (int fd : {client, server, p[0], p[1], u[0], u[1]}) close(fd);
}

TEST(Log, APipeOnFd2GetsTheLine) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  const int status = RunChild(p[1], "");
  close(p[1]);
  const std::string got = Drain(p[0]);
  close(p[0]);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(got.find(std::string("warn: ") + kMessage), std::string::npos) << got;
}

TEST(Log, ATcpConnectionOnFd2NeverGetsALine) {
  int client = -1, server = -1;
  ASSERT_TRUE(TcpPair(&client, &server));
  const int status = RunChild(client, "");
  close(client);
  const std::string got = Drain(server);  // EOF once the child is gone
  close(server);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(got.find("sanlib["), std::string::npos) << "the client read: " << got;
}

TEST(Log, SanLogFileTakesTheLineAndFd2StaysClean) {
  char dir[] = "/tmp/san-log-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/san.log";
  int client = -1, server = -1;
  ASSERT_TRUE(TcpPair(&client, &server));
  const int status = RunChild(client, path);
  close(client);
  const std::string got = Drain(server);
  close(server);
  std::ifstream in(path);
  std::stringstream file;
  file << in.rdbuf();
  unlink(path.c_str());
  rmdir(dir);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(got.empty()) << got;
  EXPECT_NE(file.str().find(std::string("warn: ") + kMessage), std::string::npos) << file.str();
}

}  // namespace
}  // namespace san
