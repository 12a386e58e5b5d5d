// Prefork servers: the listening socket is made (and its SAN rendezvous served) by one process,
// and fork children accept on it. Each child must end up with the channel the client set up
// (handed over by the owner, socket/handover.h) -- both ends shm, bytes intact -- and a plain
// client must stay kernel TCP on both ends. The owner may exit or close its copy
// (socket/rendezvous_owner.h): nobody is refused, and a worker takes the rendezvous over.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/inet.h"
#include "support/san_loopback.h"

#include "san/san.h"

// The workers are fork children of this multithreaded process that start sanlib's threads.
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }

namespace {

using san::testing_support::Loopback;
using san::testing_support::PortOf;

int Listen(uint16_t* port) { return san::testing_support::SanListenLoopback(port); }

uint8_t Pattern(size_t i) { return static_cast<uint8_t>(i * 7 + (i >> 11)); }

// A worker: accepts forever; per connection echoes until EOF and reports one byte on `report`:
// 'S' shm and intact, 'T' kernel TCP and intact, 'E' error.
[[noreturn]] void Worker(int lfd, int report) {
  alarm(30);  // never outlive a broken test
  std::vector<uint8_t> buf(65536);
  for (;;) {
    const int c = san_accept(lfd, nullptr, nullptr);
    if (c < 0) _exit(2);
    san_info info{};
    char verdict = san_getinfo(c, &info) == 0 && info.mode == SAN_MODE_SHM ? 'S' : 'T';
    size_t total = 0;
    for (;;) {
      const ssize_t n = san_recv(c, buf.data(), buf.size(), 0);
      if (n < 0) verdict = 'E';
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] != Pattern(total + i)) verdict = 'E';
      }
      if (san_send(c, buf.data(), n, MSG_NOSIGNAL) != n) verdict = 'E';
      total += n;
    }
    san_close(c);
    if (write(report, &verdict, 1) != 1) _exit(3);
  }
}

// Sends `bytes` of the pattern and checks the echo; returns the client's mode, or -1 on error.
int Exchange(int fd, size_t bytes) {
  std::vector<uint8_t> out(bytes), in(bytes);
  for (size_t i = 0; i < bytes; ++i) out[i] = Pattern(i);
  size_t sent = 0, got = 0;
  while (got < bytes) {
    pollfd p{fd, static_cast<short>(POLLIN | (sent < bytes ? POLLOUT : 0)), 0};
    if (san_poll(&p, 1, 5000) != 1) return -1;
    if (sent < bytes && (p.revents & POLLOUT)) {
      const ssize_t n = san_send(fd, out.data() + sent, bytes - sent, MSG_DONTWAIT);
      if (n > 0) sent += n;
    }
    if (p.revents & POLLIN) {
      const ssize_t n = san_recv(fd, in.data() + got, bytes - got, MSG_DONTWAIT);
      if (n == 0) return -1;
      if (n > 0) got += n;
    }
  }
  if (in != out) return -1;
  san_info info{};
  return san_getinfo(fd, &info) == 0 ? info.mode : -1;
}

int ConnectSan(uint16_t port) { return san::testing_support::SanConnectLoopback(port); }

std::string ReadVerdicts(int report, size_t n) {
  std::string v;
  while (v.size() < n) {
    pollfd p{report, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) break;
    char c;
    if (read(report, &c, 1) != 1) break;
    v += c;
  }
  return v;
}

// A plain kernel client: sends 100 kB of the pattern; true if all of it came back intact.
bool PlainExchange(uint16_t port) {
  const int plain = socket(AF_INET, SOCK_STREAM, 0);
  timeval bound{10, 0};  // a dead worker must fail the test, not hang it
  setsockopt(plain, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  sockaddr_in a = Loopback(port);
  std::vector<uint8_t> out(100000), in(100000);
  for (size_t i = 0; i < out.size(); ++i) out[i] = Pattern(i);
  const bool ok =
      connect(plain, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      send(plain, out.data(), out.size(), 0) == static_cast<ssize_t>(out.size()) &&
      recv(plain, in.data(), in.size(), MSG_WAITALL) == static_cast<ssize_t>(in.size()) &&
      in == out;
  close(plain);
  return ok;
}

// A listener, a SAN client that connected before any worker existed (its channel is filed with
// this process, the owner), then two fork children accepting on the listener (Worker). The
// destructor kills the workers.
struct Group {
  Group() {
    lfd = Listen(&port);
    if (lfd < 0 || pipe(report) != 0) return;
    early = ConnectSan(port);
    for (int i = 0; i < 2 && early >= 0; ++i) {
      const pid_t pid = fork();
      if (pid == 0) Worker(lfd, report[1]);
      workers.push_back(pid);
    }
  }
  bool ok() const { return lfd >= 0 && early >= 0 && workers.size() == 2; }
  ~Group() {
    for (pid_t pid : workers) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (lfd >= 0) san_close(lfd);
    close(report[0]);
    close(report[1]);
  }
  uint16_t port = 0;
  int lfd = -1;
  int early = -1;
  int report[2] = {-1, -1};
  std::vector<pid_t> workers;
};

TEST(Prefork, ChildrenAcceptingOnAnInheritedListenerGetTheClientsChannel) {
  Group g;
  ASSERT_TRUE(g.ok());
  const uint16_t port = g.port;
  const int early = g.early;
  const int* report = g.report;
  // The owner keeps the listener (and serves its rendezvous) but never accepts.
  EXPECT_EQ(Exchange(early, 300000), SAN_MODE_SHM);
  // The workers inherited this client end too, so (as with a kernel socket) close() alone would
  // not end the connection while they hold it: shutdown does, for every holder.
  ASSERT_EQ(san_shutdown(early, SHUT_WR), 0);
  san_close(early);
  constexpr int kClients = 6;
  for (int i = 0; i < kClients; ++i) {
    const int fd = ConnectSan(port);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(Exchange(fd, 1 << 20), SAN_MODE_SHM) << "client " << i;
    san_close(fd);
  }
  // A plain kernel client: TCP on both ends, bytes intact.
  EXPECT_TRUE(PlainExchange(port));

  // Two workers report in whatever order they finish: compare as a multiset.
  std::string verdicts = ReadVerdicts(report[0], kClients + 2);
  std::sort(verdicts.begin(), verdicts.end());
  EXPECT_EQ(verdicts, std::string(kClients + 1, 'S') + "T");
}

// The classic daemon start-up: the process that called listen() forks its workers and exits
// before any client comes. No client may be refused or reset; once a worker has taken the
// rendezvous over, SAN clients get shm channels again.
TEST(Prefork, ListenerCreatorExitsLikeADaemon) {
  int report[2], port_pipe[2];
  ASSERT_EQ(pipe(report), 0);
  ASSERT_EQ(pipe(port_pipe), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    uint16_t port = 0;
    const int lfd = Listen(&port);
    if (lfd < 0) _exit(2);
    pid_t workers[2];
    for (pid_t& w : workers) {
      w = fork();
      if (w == 0) Worker(lfd, report[1]);
    }
    if (write(port_pipe[1], &port, sizeof port) != sizeof port ||
        write(port_pipe[1], workers, sizeof workers) != sizeof workers) {
      _exit(3);
    }
    _exit(0);  // the workers carry on without their listener's creator
  }
  close(port_pipe[1]);  // a launcher that fails before writing is EOF here, not a wait forever
  uint16_t port = 0;
  pid_t workers[2] = {0, 0};
  ASSERT_EQ(read(port_pipe[0], &port, sizeof port), static_cast<ssize_t>(sizeof port));
  ASSERT_EQ(read(port_pipe[0], workers, sizeof workers), static_cast<ssize_t>(sizeof workers));
  int status = 0;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  constexpr int kClients = 8;
  std::vector<int> modes;
  for (int i = 0; i < kClients; ++i) {
    const int fd = ConnectSan(port);
    ASSERT_GE(fd, 0) << "client " << i;
    modes.push_back(Exchange(fd, 200000));
    san_close(fd);
  }
  EXPECT_TRUE(PlainExchange(port));
  for (int i = 0; i < kClients; ++i) EXPECT_NE(modes[i], -1) << "client " << i << " failed";
  // The first connections may arrive before a worker took the rendezvous over (kernel TCP on
  // both ends); the last ones find it served again.
  EXPECT_EQ(modes[kClients - 1], SAN_MODE_SHM);
  EXPECT_EQ(modes[kClients - 2], SAN_MODE_SHM);
  const std::string verdicts = ReadVerdicts(report[0], kClients + 1);
  EXPECT_EQ(verdicts.size(), static_cast<size_t>(kClients + 1));
  EXPECT_EQ(verdicts.find('E'), std::string::npos) << verdicts;
  // Our grandchildren (their parent is gone): not ours to reap.
  for (pid_t pid : workers) {
    if (pid > 0) kill(pid, SIGKILL);
  }
  close(report[0]);
  close(report[1]);
  close(port_pipe[0]);
}

// A prefork creator that closes its copy of the listener after forking and becomes a client of
// its own workers: channels filed before the close are still handed over, later clients are
// never reset, and a worker takes the rendezvous over.
TEST(Prefork, CreatorClosesItsListenerAndBecomesAClient) {
  Group g;
  ASSERT_TRUE(g.ok());
  const uint16_t port = g.port;
  const int early = g.early;  // filed with us before the workers existed, accepted after our close
  const int* report = g.report;
  ASSERT_EQ(san_close(g.lfd), 0);
  g.lfd = -1;
  EXPECT_EQ(Exchange(early, 300000), SAN_MODE_SHM);
  ASSERT_EQ(san_shutdown(early, SHUT_WR), 0);
  san_close(early);
  constexpr int kClients = 8;
  std::vector<int> modes;
  for (int i = 0; i < kClients; ++i) {
    const int fd = ConnectSan(port);
    ASSERT_GE(fd, 0);
    modes.push_back(Exchange(fd, 200000));
    san_close(fd);
  }
  EXPECT_TRUE(PlainExchange(port));
  for (int i = 0; i < kClients; ++i) EXPECT_NE(modes[i], -1) << "client " << i << " failed";
  EXPECT_EQ(modes[kClients - 1], SAN_MODE_SHM);
  const std::string verdicts = ReadVerdicts(report[0], kClients + 2);
  EXPECT_EQ(verdicts.size(), static_cast<size_t>(kClients + 2));
  EXPECT_EQ(verdicts.find('E'), std::string::npos) << verdicts;
}

}  // namespace
