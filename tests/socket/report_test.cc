// SAN_REPORT (socket/runtime.h): every process writes its own line -- a fork child does not
// repeat its parent's counters, a connection's bytes are counted once (by its last holder) -- and
// a process that gave up root after start still writes it. The cases run this binary again as a
// child with SAN_REPORT set (the configuration is read once per process).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "san/san.h"

namespace {

constexpr char kChildVar[] = "SAN_REPORT_TEST_CHILD";
constexpr size_t kBytes = 100000;

int Listener(uint16_t* port) {
  const int fd = san_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || san_bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      san_listen(fd, 4) != 0 || san_getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

// A connection that is kernel TCP first (its listener is a plain kernel socket: no SAN channel),
// then moved to shm in band by san_upgrade at both ends, as ftp_client's control connection to an
// ftpd run by inetd is by AUTH SAN. True if both ends report shm.
bool UpgradedConnection() {
  const int l = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (l < 0 || bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 1) != 0 ||
      getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return false;
  }
  const int c = san_socket(AF_INET, SOCK_STREAM, 0);
  if (c < 0 || san_connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return false;
  const int s = accept(l, nullptr, nullptr);
  close(l);
  if (s < 0) return false;
  auto other = std::async(std::launch::async, [s] { return san_upgrade(s); });
  const bool up = san_upgrade(c) == 0 && other.get() == 0;
  san_info ci{}, si{};
  const bool shm = up && san_getinfo(c, &ci) == 0 && san_getinfo(s, &si) == 0 &&
                   ci.mode == SAN_MODE_SHM && si.mode == SAN_MODE_SHM;
  san_close(c);
  san_close(s);
  return shm;
}

// The child's work: one shm connection to itself, kBytes each way; a fork child that exits
// without touching it; a connection upgraded from TCP (UpgradedConnection); then, when root,
// setuid(nobody) before exit. Exit status: 0 if all went.
int ChildMain() {
  uint16_t port = 0;
  const int l = Listener(&port);
  const int c = san_socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (l < 0 || c < 0 || san_connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 1;
  const int s = san_accept(l, nullptr, nullptr);
  if (s < 0) return 2;
  std::vector<char> buf(kBytes, 'x');
  for (int from : {c, s}) {
    const int to = from == c ? s : c;
    size_t sent = 0, got = 0;
    while (got < kBytes) {
      if (sent < kBytes) {
        const ssize_t n = san_send(from, buf.data() + sent, kBytes - sent, MSG_DONTWAIT);
        if (n > 0) sent += static_cast<size_t>(n);
      }
      const ssize_t n = san_recv(to, buf.data(), kBytes - got, MSG_DONTWAIT);
      if (n > 0) got += static_cast<size_t>(n);
    }
  }
  const pid_t child = fork();
  if (child == 0) exit(0);  // its line: nothing of its own
  int status = -1;
  waitpid(child, &status, 0);
  san_close(c);
  san_close(s);
  san_close(l);
  if (!UpgradedConnection()) return 5;
  if (geteuid() == 0) {
    const passwd* nobody = getpwnam("nobody");
    if (!nobody || setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0) return 3;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 4;
}

TEST(SanReport, Child) {
  if (!getenv(kChildVar)) GTEST_SKIP() << "run by the other cases as a child";
  exit(ChildMain());
}

// One report line's fields.
std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

unsigned long long Field(const std::string& line, const std::string& key) {
  const size_t at = line.find(" " + key + "=");
  return at == std::string::npos ? ~0ull : std::stoull(line.substr(at + key.size() + 2));
}

TEST(SanReport, EachProcessItsOwnLineEvenAfterGivingUpRoot) {
  char dir[] = "/tmp/san-report-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);  // 0700: after setuid(nobody) the file cannot be opened
  const std::string path = std::string(dir) + "/report";
  const pid_t pid = fork();
  if (pid == 0) {
    setenv(kChildVar, "1", 1);
    setenv("SAN_REPORT", path.c_str(), 1);
    // Its fork child leaves by exit(), which writes its report line; LeakSanitizer would take
    // the memory of the parent's threads (gone in the child) for its leaks (support/child.h).
    const char* asan = getenv("ASAN_OPTIONS");
    setenv("ASAN_OPTIONS", (std::string(asan ? asan : "") + ":detect_leaks=0").c_str(), 1);
    execl("/proc/self/exe", "report_test", "--gtest_filter=SanReport.Child", nullptr);
    _exit(127);
  }
  int status = -1;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::vector<std::string> lines = Lines(path);
  unlink(path.c_str());
  rmdir(dir);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(lines.size(), 2u) << "one line per process (the fork child's and its parent's)";
  // The fork child exits first: its line counts nothing it did not do.
  EXPECT_EQ(Field(lines[0], "shm_connections"), 0u) << lines[0];
  EXPECT_EQ(Field(lines[0], "shm_bytes_sent"), 0u) << lines[0];
  // The parent: both ends of its connections, each end's bytes once; the upgraded connection's
  // ends as shm only, not also as the TCP they were first.
  EXPECT_EQ(Field(lines[1], "shm_connections"), 4u) << lines[1];
  EXPECT_EQ(Field(lines[1], "tcp_connections"), 0u) << lines[1];
  EXPECT_EQ(Field(lines[1], "shm_bytes_sent"), 2 * kBytes) << lines[1];
  EXPECT_EQ(Field(lines[1], "shm_bytes_received"), 2 * kBytes) << lines[1];
}

}  // namespace
