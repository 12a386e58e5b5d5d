// Connection churn (issue 17): thousands of short connections -- connect, a small echo, close --
// in a loop and from several clients at once, each checked for its bytes and its mode (shm with
// the default eager set-up), and afterwards nothing left behind: no segment (memfd), no fd, no
// thread, no abstract socket beyond the listener's rendezvous, and the listener's rendezvous gone
// once it is closed. A figure of how fast is bench/conn's job, not this test's.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "robust_util.h"

namespace san::testing {
namespace {

constexpr int kClients = 4;
constexpr int kPerClient = 500;

TEST(Churn, ThousandsOfShortConnectionsLeaveNothingBehind) {
  Watchdog watchdog(120);
  uint16_t port = 0;
  const int listener = SanListener(&port);
  ASSERT_GE(listener, 0);
  // The baseline: the listener and sanlib's threads exist; one connection made and closed so that
  // whatever is made once per process (the close thread, a wake-up fd) is counted in it.
  {
    const int c = SanConnect(port);
    const int s = san_accept(listener, nullptr, nullptr);
    ASSERT_GE(c, 0);
    ASSERT_GE(s, 0);
    san_close(c);
    san_close(s);
  }
  ASSERT_TRUE(WaitUntil([] { return SanMemfds(getpid()).empty(); }, 10000));
  const int fds_before = OpenFds();
  const int threads_before = Threads();
  const int rendezvous_before = SanRendezvousSockets();

  std::atomic<int> served{0}, server_errors{0};
  std::thread server([&] {
    for (int i = 0; i < kClients * kPerClient; ++i) {
      const int s = san_accept(listener, nullptr, nullptr);
      if (s < 0) {
        server_errors++;
        continue;
      }
      char buf[64];
      const ssize_t n = san_recv(s, buf, sizeof buf, 0);
      if (n <= 0 || san_send(s, buf, static_cast<size_t>(n), 0) != n || !IsShm(s)) {
        server_errors++;
      }
      san_close(s);
      served++;
    }
  });
  std::atomic<int> ok{0}, not_shm{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < kPerClient; ++i) {
        const int c = SanConnect(port);
        if (c < 0) {
          failed++;
          continue;
        }
        if (!IsShm(c)) not_shm++;
        char out[32], in[32];
        std::snprintf(out, sizeof out, "client %d conn %d", t, i);
        const size_t len = std::strlen(out) + 1;
        const bool good = san_send(c, out, len, 0) == static_cast<ssize_t>(len) &&
                          san_recv(c, in, sizeof in, MSG_WAITALL) == static_cast<ssize_t>(len) &&
                          std::memcmp(in, out, len) == 0;
        // The server closes after its echo: EOF next.
        char extra;
        if (good && san_recv(c, &extra, 1, 0) == 0) {
          ok++;
        } else {
          failed++;
        }
        san_close(c);
      }
    });
  }
  for (std::thread& c : clients) c.join();
  server.join();
  EXPECT_EQ(ok.load(), kClients * kPerClient);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(not_shm.load(), 0);
  EXPECT_EQ(server_errors.load(), 0);
  EXPECT_EQ(served.load(), kClients * kPerClient);
  // Closing connections finish in the close thread (FIN, linger): bounded.
  EXPECT_TRUE(WaitUntil([] { return SanMemfds(getpid()).empty(); }, 10000))
      << SanMemfds(getpid()).size() << " segments left";
  EXPECT_TRUE(WaitUntil([&] { return OpenFds() <= fds_before; }, 10000))
      << OpenFds() << " fds, " << fds_before << " before";
  EXPECT_LE(Threads(), threads_before);
  EXPECT_EQ(SanRendezvousSockets(), rendezvous_before);
  san_close(listener);
  EXPECT_TRUE(WaitUntil([&] { return SanRendezvousSockets() < rendezvous_before; }, 5000))
      << "the listener's rendezvous outlived it";
}

}  // namespace
}  // namespace san::testing
