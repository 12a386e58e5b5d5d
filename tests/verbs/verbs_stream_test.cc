// sanlib's stream protocol (proto::Stream, what every SAN socket runs) over the verbs provider:
// bytes checked in both directions at once, orderly close, abortive close, and a peer process
// that dies. Needs an RDMA device: SKIPs (saying why) without one; deploy/softroce/ runs it on
// Soft-RoCE inside a QEMU guest (ctest label `rdma`), where a skip counts as a failure.
#include <signal.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "sanlib/common/clock.h"
#ifdef SAN_TEST_HAVE_VERBS
#include "sanlib/fabric/verbs/verbs_endpoint.h"
#endif
#include "support/program.h"
#include "verbs_test_util.h"

namespace san {
namespace {

using verbs_testing::MakeStreamPair;
using verbs_testing::PatternByte;
using verbs_testing::StreamPair;
using verbs_testing::WaitALittle;

constexpr uint64_t kDeadlineNs = 60'000'000'000ull;  // emulated RDMA is slow; never reached

struct Side {
  uint64_t sent = 0, received = 0, mismatches = 0;
  int error = 0;
};

// Sends `total` pattern bytes on `s` (in Send calls of up to `block` bytes, the pattern written
// into the one buffer right before each call) while reading and checking `total` from it.
void Exchange(proto::Stream& s, uint64_t total, uint32_t out_seed, uint32_t in_seed, Side* side,
              size_t block = 48 * 1024) {
  std::vector<uint8_t> out(block), in(64 * 1024);
  const uint64_t deadline = NowNs() + kDeadlineNs;
  while ((side->sent < total || side->received < total) && NowNs() < deadline) {
    bool moved = false;
    if (side->sent < total) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), total - side->sent));
      for (size_t i = 0; i < n; ++i) out[i] = PatternByte(side->sent + i, out_seed);
      const iovec iov{out.data(), n};
      Result<size_t> r = s.Send(&iov, 1);
      if (r.ok()) {
        side->sent += r.value();
        moved = r.value() > 0;
      } else if (!r.status().would_block()) {
        side->error = r.status().code();
        return;
      }
      s.Flush();
    }
    const iovec iov{in.data(), in.size()};
    Result<size_t> r = s.Recv(&iov, 1, false);
    if (r.ok() && r.value() > 0) {
      for (size_t i = 0; i < r.value(); ++i) {
        side->mismatches += in[i] != PatternByte(side->received + i, in_seed);
      }
      side->received += r.value();
      moved = true;
    } else if (r.ok()) {
      side->error = -1;  // EOF in the middle
      return;
    } else if (!r.status().would_block()) {
      side->error = r.status().code();
      return;
    }
    if (!moved) WaitALittle(s, 5);
  }
}

class VerbsStream : public ::testing::Test {
 protected:
  void SetUp() override { SAN_SKIP_WITHOUT_VERBS(); }
};

TEST_F(VerbsStream, BytesBothDirectionsAtOnce) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(MakeStreamPair(&pair));
  constexpr uint64_t kBytes = 8u << 20;
  Side client, server;
  std::thread t([&] { Exchange(*pair.server, kBytes, 2, 1, &server); });
  Exchange(*pair.client, kBytes, 1, 2, &client);
  t.join();
  EXPECT_EQ(client.error, 0);
  EXPECT_EQ(server.error, 0);
  EXPECT_EQ(client.received, kBytes);
  EXPECT_EQ(server.received, kBytes);
  EXPECT_EQ(client.mismatches + server.mismatches, 0u);
  const proto::StreamStats cs = pair.client->Stats(), ss = pair.server->Stats();
  EXPECT_EQ(cs.bytes_sent, kBytes);
  EXPECT_EQ(ss.bytes_received, kBytes);
  std::printf("SAN-VERBS-STREAM bytes_each_way=%llu client_packets=%llu server_packets=%llu\n",
              static_cast<unsigned long long>(kBytes),
              static_cast<unsigned long long>(cs.packets_sent),
              static_cast<unsigned long long>(ss.packets_sent));
}

// Sends from the application's memory (StreamParams::zero_copy_min): the NIC reads each Send's
// buffer in place, and Send returns only once it has. Exchange rewrites its one buffer right
// after every Send returns, so a Send that returned before the NIC had read would show up as
// mismatches at the peer. Both directions at once, 512 KiB per Send call.
TEST_F(VerbsStream, ZeroCopySendsBothDirectionsBytesExact) {
  if (!(fabric::GetProvider("verbs")->capabilities() & fabric::kCapRegisteredSend)) {
    GTEST_SKIP() << "no kCapRegisteredSend (ibv_is_fork_initialized() is not IBV_FORK_UNNEEDED)";
  }
  proto::StreamParams params;
  params.zero_copy_min = 64 << 10;
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(MakeStreamPair(&pair, params));
  constexpr uint64_t kBytes = 8u << 20;
  Side client, server;
  std::thread t([&] { Exchange(*pair.server, kBytes, 2, 1, &server, 512 << 10); });
  Exchange(*pair.client, kBytes, 1, 2, &client, 512 << 10);
  t.join();
  EXPECT_EQ(client.error, 0);
  EXPECT_EQ(server.error, 0);
  EXPECT_EQ(client.received, kBytes);
  EXPECT_EQ(server.received, kBytes);
  EXPECT_EQ(client.mismatches + server.mismatches, 0u);
  const proto::StreamStats cs = pair.client->Stats(), ss = pair.server->Stats();
  EXPECT_GT(cs.zero_copy_bytes_sent, kBytes / 2);
  EXPECT_GT(ss.zero_copy_bytes_sent, kBytes / 2);
  EXPECT_EQ(cs.zero_copy_refused + ss.zero_copy_refused, 0u);
  std::printf(
      "SAN-VERBS-STREAM zero_copy bytes_each_way=%llu client_zero_copy=%llu "
      "server_zero_copy=%llu client_calls=%llu\n",
      static_cast<unsigned long long>(kBytes),
      static_cast<unsigned long long>(cs.zero_copy_bytes_sent),
      static_cast<unsigned long long>(ss.zero_copy_bytes_sent),
      static_cast<unsigned long long>(cs.zero_copy_sends));
#ifdef SAN_TEST_HAVE_VERBS
  // The provider's own count: the bytes went from registered application memory, not bounced.
  auto* cep = dynamic_cast<fabric::verbs::VerbsEndpoint*>(&pair.client->endpoint());
  ASSERT_NE(cep, nullptr);
  EXPECT_EQ(cep->send_counters().in_place_bytes, cs.zero_copy_bytes_sent);
  std::printf("SAN-VERBS-STREAM zero_copy client in_place=%llu bounced=%llu inline=%llu\n",
              static_cast<unsigned long long>(cep->send_counters().in_place_bytes),
              static_cast<unsigned long long>(cep->send_counters().bounced_bytes),
              static_cast<unsigned long long>(cep->send_counters().inline_bytes));
#endif
}

TEST_F(VerbsStream, ShutdownWriteDeliversEverythingThenEof) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(MakeStreamPair(&pair));
  std::string text(100000, 'x');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
  size_t sent = 0;
  const uint64_t deadline = NowNs() + kDeadlineNs;
  std::string got;
  bool eof = false;
  while (!eof && NowNs() < deadline) {
    if (sent < text.size()) {
      const iovec iov{text.data() + sent, text.size() - sent};
      Result<size_t> r = pair.client->Send(&iov, 1);
      if (r.ok()) sent += r.value();
      if (sent == text.size()) {
        ASSERT_TRUE(pair.client->ShutdownWrite().ok());
      }
    }
    char buf[8192];
    const iovec in{buf, sizeof buf};
    Result<size_t> r = pair.server->Recv(&in, 1, false);
    if (r.ok() && r.value() == 0) eof = true;
    if (r.ok()) got.append(buf, r.value());
    if (!r.ok()) {
      ASSERT_TRUE(r.status().would_block()) << r.status().ToString();
      pair.client->Progress();
      WaitALittle(*pair.server, 5);
    }
  }
  EXPECT_TRUE(eof);
  EXPECT_EQ(got, text);
  // The other direction still works after a half-close.
  const iovec back{const_cast<char*>("ok"), 2};
  ASSERT_TRUE(pair.server->Send(&back, 1).ok());
  ASSERT_TRUE(pair.server->Flush().ok());
  char two[2] = {};
  const iovec in{two, 2};
  size_t have = 0;
  while (have < 2 && NowNs() < deadline) {
    Result<size_t> r = pair.client->Recv(&in, 1, false);
    if (r.ok()) {
      have += r.value();
      break;
    }
    ASSERT_TRUE(r.status().would_block()) << r.status().ToString();
    WaitALittle(*pair.client, 5);
  }
  EXPECT_EQ(std::string(two, 2), "ok");
}

TEST_F(VerbsStream, AbortIsConnResetAtThePeer) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(MakeStreamPair(&pair));
  pair.client->Abort();
  const uint64_t deadline = NowNs() + kDeadlineNs;
  int error = 0;
  while (error == 0 && NowNs() < deadline) {
    char buf[16];
    const iovec in{buf, sizeof buf};
    Result<size_t> r = pair.server->Recv(&in, 1, false);
    if (!r.ok() && !r.status().would_block()) error = r.status().code();
    if (r.ok()) break;
    WaitALittle(*pair.server, 20);
  }
  EXPECT_TRUE(error == ECONNRESET || error == EPROTO) << error;
  EXPECT_TRUE(pair.server->endpoint().broken());
}

// A peer process SIGKILLed mid-connection: the kernel tears its rdma_cm id down (a DREQ reaches
// us), and the reader that sleeps on the doorbell wakes with ECONNRESET.
TEST_F(VerbsStream, PeerProcessDeathWakesTheReaderWithConnReset) {
  fabric::Provider* provider = fabric::GetProvider("verbs");
  const proto::StreamParams params;
  const uint16_t port = fabric::testing::NextPort();
  sockaddr_in addr = fabric::testing::Ipv4(verbs_testing::VerbsIp(), port);
  auto listener = provider->Listen(fabric::testing::Sa(addr), sizeof(addr),
                                   proto::Stream::EndpointAttrFor(params));
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  const std::string port_text = std::to_string(port);
  testing_support::Program peer;
  testing_support::ProgramSpec spec;
  spec.argv = {SAN_VERBS_STREAM_PEER, verbs_testing::VerbsIp(), port_text};
  ASSERT_TRUE(peer.Start(spec)) << peer.error();
  auto request = fabric::testing::WaitRequest(listener.value().get(), 30000);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  auto server = proto::Stream::Create(std::move(request).value(), provider->capabilities(), params);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.value()->endpoint().Accept().ok());
  ASSERT_TRUE(server.value()->Start().ok());
  proto::Stream& s = *server.value();
  std::string got;
  const uint64_t deadline = NowNs() + kDeadlineNs;
  int error = 0;
  bool killed = false;
  while (error == 0 && NowNs() < deadline) {
    char buf[64];
    const iovec in{buf, sizeof buf};
    Result<size_t> r = s.Recv(&in, 1, false);
    if (r.ok() && r.value() > 0) got.append(buf, r.value());
    if (r.ok() && r.value() == 0) {
      ADD_FAILURE() << "EOF from a peer that was killed";
      break;
    }
    if (!r.ok() && !r.status().would_block()) {
      error = r.status().code();
      EXPECT_TRUE(killed) << "error before the kill: " << r.status().ToString();
    }
    if (got == "hello" && !killed) {
      ASSERT_TRUE(peer.Signal(SIGKILL));
      peer.WaitStatus(-1);
      killed = true;
    }
    if (error == 0) WaitALittle(s, 50);
  }
  if (!killed) {
    ADD_FAILURE() << "the peer was not killed by the test; wait status " << peer.Kill();
  }
  EXPECT_EQ(got, "hello");
  EXPECT_TRUE(killed);
  EXPECT_EQ(error, ECONNRESET);
}

// A peer process that reads everything is SIGKILLed while this side streams zero-copy sends to
// it: the sending call fails with ECONNRESET (whether the death finds packets in flight or the
// call between them), nothing stays registered, nothing hangs.
TEST_F(VerbsStream, PeerDeathDuringZeroCopySendsIsConnReset) {
  fabric::Provider* provider = fabric::GetProvider("verbs");
  if (!(provider->capabilities() & fabric::kCapRegisteredSend)) {
    GTEST_SKIP() << "no kCapRegisteredSend (ibv_is_fork_initialized() is not IBV_FORK_UNNEEDED)";
  }
  proto::StreamParams params;
  params.zero_copy_min = 64 << 10;
  const uint16_t port = fabric::testing::NextPort();
  sockaddr_in addr = fabric::testing::Ipv4(verbs_testing::VerbsIp(), port);
  auto listener = provider->Listen(fabric::testing::Sa(addr), sizeof(addr),
                                   proto::Stream::EndpointAttrFor(params));
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  const std::string port_text = std::to_string(port);
  testing_support::Program peer;
  testing_support::ProgramSpec spec;
  spec.argv = {SAN_VERBS_STREAM_PEER, verbs_testing::VerbsIp(), port_text, "drain"};
  ASSERT_TRUE(peer.Start(spec)) << peer.error();
  auto request = fabric::testing::WaitRequest(listener.value().get(), 30000);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  auto server = proto::Stream::Create(std::move(request).value(), provider->capabilities(), params);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE(server.value()->endpoint().Accept().ok());
  ASSERT_TRUE(server.value()->Start().ok());
  proto::Stream& s = *server.value();
  std::vector<uint8_t> block(1 << 20, 0x5A);
  const uint64_t deadline = NowNs() + kDeadlineNs;
  int error = 0;
  bool killed = false;
  while (error == 0 && NowNs() < deadline) {
    const iovec iov{block.data(), block.size()};
    Result<size_t> r = s.Send(&iov, 1);
    if (!r.ok() && !r.status().would_block()) error = r.status().code();
    if (!r.ok() && r.status().would_block()) WaitALittle(s, 20);
    if (!killed && s.Stats().zero_copy_bytes_sent >= (4u << 20)) {
      ASSERT_TRUE(peer.Signal(SIGKILL));
      peer.WaitStatus(-1);
      killed = true;
    }
  }
  if (!killed) peer.Kill();
  EXPECT_TRUE(killed) << "zero-copy bytes sent: " << s.Stats().zero_copy_bytes_sent;
  EXPECT_EQ(error, ECONNRESET);
  const proto::StreamStats st = s.Stats();
  std::printf("SAN-VERBS-STREAM zero_copy peer_death after %llu zero-copy bytes in %llu calls\n",
              static_cast<unsigned long long>(st.zero_copy_bytes_sent),
              static_cast<unsigned long long>(st.zero_copy_sends));
  EXPECT_GT(st.zero_copy_sends, 0u);
#ifdef SAN_TEST_HAVE_VERBS
  // Every registration was ended before its Send returned, the failed one's too.
  auto* ep = dynamic_cast<fabric::verbs::VerbsEndpoint*>(&s.endpoint());
  ASSERT_NE(ep, nullptr);
  EXPECT_EQ(ep->registered_send_regions(), 0);
#endif
}

}  // namespace
}  // namespace san
