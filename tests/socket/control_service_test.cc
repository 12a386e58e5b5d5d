// ControlService (socket/control_service.h) keeps a claim whose channel may still come instead of
// waiting for it: the connection thread that serves it must go on answering rendezvous requests,
// reports and other claims meanwhile. Before, the owner's thread waited inside the claim (up to
// 6 s, ConnectionThread::Claim) while the claimer gave up after 2 s.
// A real control socket and real claimers (ClaimFromOwner, the handover a prefork worker makes,
// with an accepted loopback connection as its proof); the channel books are stood in for by the
// TakeChannel callback, which says "not ready yet" until the test lets it answer.
#include "sanlib/socket/control_service.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>

#include "sanlib/common/clock.h"
#include "sanlib/common/control_name.h"
#include "sanlib/fabric/registry.h"
#include "sanlib/socket/handover.h"
#include "support/inet.h"

namespace san {
namespace {

// An accepted loopback connection and its 4-tuple: the claimer's proof.
struct Accepted {
  int client = -1;
  int server = -1;
  proto::FourTuple tuple;
  ~Accepted() {
    if (client >= 0) close(client);
    if (server >= 0) close(server);
  }
};

void Accept(Accepted* a) {
  const int l = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sin = testing_support::Loopback(0);
  ASSERT_EQ(bind(l, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  ASSERT_EQ(listen(l, 1), 0);
  sin.sin_port = htons(testing_support::PortOf(l));
  a->client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(a->client, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  a->server = accept(l, nullptr, nullptr);
  close(l);
  ASSERT_GE(a->server, 0);
  socklen_t len = sizeof a->tuple.server;
  ASSERT_EQ(getsockname(a->server, reinterpret_cast<sockaddr*>(&a->tuple.server), &len), 0);
  len = sizeof a->tuple.client;
  ASSERT_EQ(getpeername(a->server, reinterpret_cast<sockaddr*>(&a->tuple.client), &len), 0);
}

// Serves the control socket for `ms`, as the connection thread's loop does (a 1 ms poll while
// claims are kept).
void ServeFor(ControlService& service, SocketTable& table, const ControlService::TakeChannel& take,
              int ms) {
  const uint64_t until = NowNs() + uint64_t(ms) * 1000000;
  while (NowNs() < until) {
    pollfd p{service.fd(), POLLIN, 0};
    if (poll(&p, 1, service.has_parked() ? 1 : 10) > 0) service.Serve(table, take);
    if (service.has_parked()) service.ServeParked(take);
  }
}

// A sanstat report request answered within `ms`: its header line.
std::string Report(int ms) {
  const int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sun;
  const socklen_t len = ControlSocketName(getpid(), &sun);
  if (connect(s, reinterpret_cast<sockaddr*>(&sun), len) != 0) {
    close(s);
    return "connect failed";
  }
  const char type = ControlService::kReport;
  std::string text;
  if (write(s, &type, 1) == 1) {
    char buf[256];
    for (;;) {
      pollfd p{s, POLLIN, 0};
      if (poll(&p, 1, ms) != 1) break;
      const ssize_t n = read(s, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
  }
  close(s);
  return text.substr(0, text.find('\n'));
}

class ControlServiceClaims : public ::testing::Test {
 protected:
  void SetUp() override {
    provider_ = fabric::GetProvider("shm");
    ASSERT_NE(provider_, nullptr);
    ASSERT_TRUE(service_.Open().ok());
    Accept(&conn_);
  }
  void TearDown() override { service_.Close(); }

  // The claim a prefork worker makes, from another thread (the owner here is this process).
  std::future<Result<std::unique_ptr<proto::Stream>>> Claim() {
    return std::async(std::launch::async, [this] {
      return ClaimFromOwner(getpid(), conn_.tuple, conn_.server, *provider_);
    });
  }

  fabric::Provider* provider_ = nullptr;
  ControlService service_;
  SocketTable table_;
  Accepted conn_;
};

TEST_F(ControlServiceClaims, AClaimThatMustWaitIsKeptAndOthersAreServedMeanwhile) {
  std::atomic<bool> ready{false};
  std::atomic<int> asked{0};
  std::atomic<bool> last_seen{false};
  const ControlService::TakeChannel take =
      [&](const proto::FourTuple& tuple, int proof_fd,
          bool last) -> Result<std::unique_ptr<proto::Stream>> {
    ++asked;
    last_seen = last_seen || last;
    EXPECT_TRUE(proto::SameAddress(tuple.client, conn_.tuple.client));
    EXPECT_GE(proof_fd, 0);
    if (!ready && !last) return Status(EAGAIN, "not named yet");
    return Status(ENOENT, "no channel");
  };
  auto claim = Claim();
  // The claim arrives and is kept: Serve returns, the claimer still waits.
  const uint64_t start = NowNs();
  ServeFor(service_, table_, take, 100);
  EXPECT_TRUE(service_.has_parked());
  EXPECT_EQ(claim.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  EXPECT_GT(asked.load(), 1) << "asked again at the passes";
  // Meanwhile the thread answers others: a report, at once.
  auto report = std::async(std::launch::async, [] { return Report(1000); });
  ServeFor(service_, table_, take, 50);
  EXPECT_EQ(report.get().rfind("#sanlib-stat 1 " + std::to_string(getpid()), 0), 0u);
  EXPECT_TRUE(service_.has_parked());
  // The channel's fate is known: the kept claim is answered at the next pass.
  ready = true;
  ServeFor(service_, table_, take, 20);
  EXPECT_FALSE(service_.has_parked());
  ASSERT_EQ(claim.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  Result<std::unique_ptr<proto::Stream>> got = claim.get();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), ENOENT) << got.status().ToString();
  EXPECT_FALSE(last_seen.load());
  EXPECT_LT(NowNs() - start, uint64_t{ControlService::kClaimWaitNs});
}

TEST_F(ControlServiceClaims, AKeptClaimIsAnsweredBeforeTheClaimerGivesUp) {
  std::atomic<bool> last_seen{false};
  const ControlService::TakeChannel take =
      [&](const proto::FourTuple&, int, bool last) -> Result<std::unique_ptr<proto::Stream>> {
    if (!last) return Status(EAGAIN, "not named yet");
    last_seen = true;
    return Status(ENOENT, "given up");
  };
  auto claim = Claim();
  const uint64_t start = NowNs();
  ServeFor(service_, table_, take, static_cast<int>(ControlService::kClaimWaitNs / 1000000) + 100);
  EXPECT_TRUE(last_seen.load()) << "the last ask says so (the books give the channel up)";
  EXPECT_FALSE(service_.has_parked());
  ASSERT_EQ(claim.wait_for(std::chrono::milliseconds(100)), std::future_status::ready);
  Result<std::unique_ptr<proto::Stream>> got = claim.get();
  ASSERT_FALSE(got.ok());
  // The owner's answer, not the claimer's own timeout (ETIMEDOUT after 2 s).
  EXPECT_EQ(got.status().code(), ENOENT) << got.status().ToString();
  EXPECT_LT(NowNs() - start, 2000000000ull);
}

}  // namespace
}  // namespace san
