// The provider conformance suite: every backend must pass it unchanged (instantiated below for
// "shm", "loopback" and "verbs"). Each test states one clause of the contract in provider.h.
//
// verbs runs where this host has an RDMA device (deploy/softroce/ runs it on Soft-RoCE inside a
// QEMU guest, label `rdma`); elsewhere its cases SKIP and say why. Its addresses: 127.0.0.1
// (rdma_cm's loopback path) unless SAN_TEST_VERBS_IP names an address of an RDMA port.
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>

#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "fabric_test_util.h"
#include "sanlib/fabric/registry.h"
#include "support/loopback/loopback_provider.h"

namespace san::fabric {
namespace {

using testing::ConnectPair;
using testing::OneSegment;
using testing::Pair;
using testing::PairOptions;
using testing::WaitCompletions;

// A provider by its name: the registry's, or the tests' own loopback provider.
Provider* ProviderNamed(const std::string& name) {
  return name == "loopback" ? loopback::SharedProvider() : GetProvider(name);
}

class ProviderConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (ProviderNamed(GetParam()) == nullptr) {
      GTEST_SKIP() << "provider '" << GetParam()
                   << "' unavailable here: " << WhyUnavailable(GetParam());
    }
  }
  Provider* provider() {
    Provider* p = ProviderNamed(GetParam());
    EXPECT_NE(p, nullptr);
    return p;
  }
  // The address listeners and clients use.
  const char* Ip() const {
    const char* ip = std::getenv("SAN_TEST_VERBS_IP");
    return GetParam() == "verbs" && ip != nullptr && *ip != '\0' ? ip : "127.0.0.1";
  }
  PairOptions Options() const {
    PairOptions opt;
    opt.listen_ip = Ip();
    opt.connect_ip = Ip();
    return opt;
  }
};

// A send the receiver has no room for breaks the connection. shm sees it in PostSend (EPROTO, no
// completion); verbs only when the peer's NIC refuses it (PostSend succeeds, its completion
// reports the break). Either way every outstanding piece of work then completes with ECONNRESET.
void ExpectSenderBroken(Endpoint* sender, const Status& posted, int receives_posted) {
  const size_t expect = size_t(receives_posted) + (posted.ok() ? 1 : 0);
  auto got = WaitCompletions(sender, expect);
  ASSERT_EQ(got.size(), expect);
  int sends = 0;
  for (const Completion& c : got) {
    EXPECT_EQ(c.error, ECONNRESET);
    sends += c.op == Op::kSend;
  }
  EXPECT_EQ(sends, posted.ok() ? 1 : 0);
  EXPECT_TRUE(sender->broken());
}

TEST_P(ProviderConformance, AdvertisesNameAndCapabilities) {
  Provider* p = provider();
  EXPECT_EQ(GetParam(), p->name());
  const uint32_t caps = p->capabilities();
  EXPECT_TRUE(caps & kCapReliable);
  EXPECT_TRUE(caps & kCapSendFromAnyMemory);
  EXPECT_TRUE(caps & kCapWaitable);
  EXPECT_GE(p->max_mtu(), 32768u);
  sockaddr_in local = testing::Ipv4(Ip(), 80);
  EXPECT_TRUE(p->Reaches(testing::Sa(local), sizeof(local)));
}

TEST_P(ProviderConformance, ConnectAcceptCarriesConnectData) {
  PairOptions opt = Options();
  opt.data.length = 5;
  std::memcpy(opt.data.bytes, "hello", 5);
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  EXPECT_EQ(pair.server->peer_data().length, 5);
  EXPECT_EQ(0, std::memcmp(pair.server->peer_data().bytes, "hello", 5));
  EXPECT_FALSE(pair.client->broken());
  EXPECT_FALSE(pair.server->broken());
  EXPECT_GE(pair.client->mtu(), 32768u);
}

TEST_P(ProviderConformance, WildcardListenerReachableThroughLoopback) {
  PairOptions opt = Options();
  opt.listen_ip = "0.0.0.0";
  opt.connect_ip = Ip();  // 127.0.0.1, or for verbs the device's address (docs/verbs.md)
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
}

TEST_P(ProviderConformance, RejectGivesConnRefused) {
  const uint16_t port = testing::NextPort();
  sockaddr_in addr = testing::Ipv4(Ip(), port);
  auto listener = provider()->Listen(testing::Sa(addr), sizeof(addr), EndpointAttr());
  ASSERT_TRUE(listener.ok());
  auto client = provider()->CreateEndpoint(EndpointAttr());
  ASSERT_TRUE(client.ok());
  Status status;
  std::thread t([&] { status = client.value()->Connect(testing::Sa(addr), sizeof(addr), {}); });
  auto server = testing::WaitRequest(listener->get());
  ASSERT_TRUE(server.ok());
  EXPECT_TRUE(server.value()->Reject(ECONNREFUSED).ok());
  t.join();
  EXPECT_EQ(status.code(), ECONNREFUSED) << status.ToString();
}

TEST_P(ProviderConformance, NoListenerGivesConnRefused) {
  auto client = provider()->CreateEndpoint(EndpointAttr());
  ASSERT_TRUE(client.ok());
  sockaddr_in addr = testing::Ipv4(Ip(), testing::NextPort());
  Status s = client.value()->Connect(testing::Sa(addr), sizeof(addr), {});
  EXPECT_EQ(s.code(), ECONNREFUSED) << s.ToString();
}

TEST_P(ProviderConformance, SecondListenerOnSameAddressFails) {
  sockaddr_in addr = testing::Ipv4(Ip(), testing::NextPort());
  auto first = provider()->Listen(testing::Sa(addr), sizeof(addr), EndpointAttr());
  ASSERT_TRUE(first.ok());
  auto second = provider()->Listen(testing::Sa(addr), sizeof(addr), EndpointAttr());
  EXPECT_EQ(second.status().code(), EADDRINUSE);
}

// Sends each length with its own immediate, in both directions, and checks bytes, length, imm
// and which receive (id, in posting order) it landed in.
TEST_P(ProviderConformance, ImmediatesAndLengthsRoundTrip) {
  PairOptions opt = Options();
  opt.recv_size = 32768;
  opt.client_recvs = 9;
  opt.server_recvs = 9;
  opt.attr.buffer_bytes = 1u << 20;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  const uint32_t lengths[] = {0, 1, 4, 63, 64, 65, 1000, 4096, 32768};
  for (int dir = 0; dir < 2; ++dir) {
    Endpoint* from = dir == 0 ? pair.client.get() : pair.server.get();
    Endpoint* to = dir == 0 ? pair.server.get() : pair.client.get();
    const MemoryRegion& buf = dir == 0 ? pair.server_buf : pair.client_buf;
    const uint64_t base_id = dir == 0 ? 2000 : 1000;
    std::vector<uint8_t> src(32768);
    int i = 0;
    for (uint32_t len : lengths) {
      for (uint32_t b = 0; b < len; ++b) src[b] = static_cast<uint8_t>(b * 7 + i + dir);
      Status s = from->PostSend(OneSegment(500 + i, 0xA5000000u + i, src.data(), len));
      ASSERT_TRUE(s.ok()) << s.ToString();
      auto sent = WaitCompletions(from, 1);
      ASSERT_EQ(sent.size(), 1u);
      EXPECT_EQ(sent[0].op, Op::kSend);
      EXPECT_EQ(sent[0].id, 500u + i);
      EXPECT_EQ(sent[0].error, 0);
      auto got = WaitCompletions(to, 1);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(got[0].op, Op::kRecv);
      EXPECT_EQ(got[0].error, 0);
      EXPECT_EQ(got[0].id, base_id + i);
      EXPECT_EQ(got[0].length, len);
      EXPECT_EQ(got[0].imm, 0xA5000000u + i);
      EXPECT_EQ(0, std::memcmp(buf.addr + size_t(i) * opt.recv_size, src.data(), len));
      ++i;
    }
  }
}

// Many messages through a small receive window, reposting as they arrive: order is kept and each
// message lands in the receive posted for it.
TEST_P(ProviderConformance, OrderingOverManyMessages) {
  PairOptions opt = Options();
  opt.recv_size = 256;
  opt.server_recvs = 16;
  opt.attr.recv_depth = 16;
  opt.attr.send_depth = 8;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  constexpr uint32_t kMessages = 20000;
  uint32_t sent = 0, received = 0, credits = 16, in_flight_sends = 0;
  uint64_t next_recv_id = 2000;
  Completion c[16];
  const uint64_t deadline = NowNs() + 20'000'000'000ull;
  while (received < kMessages && NowNs() < deadline) {
    while (sent < kMessages && credits > 0 && in_flight_sends < 8) {
      uint32_t payload[4] = {sent, ~sent, sent * 3, 0};
      Status s = pair.client->PostSend(OneSegment(sent, sent, payload, sizeof(payload)));
      ASSERT_TRUE(s.ok()) << s.ToString();
      ++sent;
      --credits;
      ++in_flight_sends;
    }
    int k = pair.client->Poll(c, 16);
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(c[i].op, Op::kSend);
      ASSERT_EQ(c[i].error, 0);
      --in_flight_sends;
    }
    k = pair.server->Poll(c, 16);
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(c[i].op, Op::kRecv);
      ASSERT_EQ(c[i].error, 0);
      ASSERT_EQ(c[i].imm, received);
      ASSERT_EQ(c[i].id, next_recv_id);
      const size_t slot = (c[i].id - 2000) % 16;
      uint32_t payload[4];
      std::memcpy(payload, pair.server_buf.addr + slot * 256, sizeof(payload));
      ASSERT_EQ(payload[0], received);
      ASSERT_EQ(payload[1], ~received);
      // Repost the same buffer under the next id.
      RecvWork w;
      w.id = next_recv_id + 16;
      w.addr = pair.server_buf.addr + slot * 256;
      w.length = 256;
      w.key = pair.server_buf.key;
      ASSERT_TRUE(pair.server->PostRecv(w).ok());
      ++next_recv_id;
      ++received;
      ++credits;
    }
  }
  EXPECT_EQ(received, kMessages);
}

TEST_P(ProviderConformance, MultiSegmentSendIsConcatenated) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Options(), &pair));
  std::string a = "alpha-", b = "", c = "charlie-", d(1000, 'd');
  SendWork w;
  w.id = 9;
  w.imm = 77;
  w.num_segments = 4;
  w.segments[0] = Segment{a.data(), uint32_t(a.size()), 0};
  w.segments[1] = Segment{b.data(), 0, 0};
  w.segments[2] = Segment{c.data(), uint32_t(c.size()), 0};
  w.segments[3] = Segment{d.data(), uint32_t(d.size()), 0};
  ASSERT_TRUE(pair.client->PostSend(w).ok());
  auto got = WaitCompletions(pair.server.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  const std::string expect = a + b + c + d;
  EXPECT_EQ(got[0].length, expect.size());
  EXPECT_EQ(got[0].imm, 77u);
  EXPECT_EQ(0, std::memcmp(pair.server_buf.addr, expect.data(), expect.size()));
  // More than kMaxSendSegments is refused outright.
  w.num_segments = kMaxSendSegments + 1;
  EXPECT_EQ(pair.client->PostSend(w).code(), EINVAL);
}

TEST_P(ProviderConformance, PayloadBeyondMtuIsEMSGSIZE) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Options(), &pair));
  std::vector<char> big(size_t(pair.client->mtu()) + 1);
  Status s = pair.client->PostSend(OneSegment(1, 0, big.data(), uint32_t(big.size())));
  EXPECT_EQ(s.code(), EMSGSIZE);
  // Nothing was consumed: the connection still works.
  EXPECT_FALSE(pair.client->broken());
  ASSERT_TRUE(pair.client->PostSend(OneSegment(2, 5, "x", 1)).ok());
  auto got = WaitCompletions(pair.server.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].imm, 5u);
  EXPECT_EQ(got[0].id, 2000u);
}

TEST_P(ProviderConformance, FullSendQueueIsEAGAINUntilPolled) {
  PairOptions opt = Options();
  opt.attr.send_depth = 4;
  opt.attr.recv_depth = 16;
  opt.server_recvs = 16;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pair.client->PostSend(OneSegment(i, i, "m", 1)).ok());
  EXPECT_EQ(pair.client->PostSend(OneSegment(4, 4, "m", 1)).code(), EAGAIN);
  auto done = WaitCompletions(pair.client.get(), 4);
  ASSERT_EQ(done.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(done[i].id, uint64_t(i));  // in posting order
  EXPECT_TRUE(pair.client->PostSend(OneSegment(4, 4, "m", 1)).ok());
  EXPECT_EQ(WaitCompletions(pair.server.get(), 5).size(), 5u);
}

TEST_P(ProviderConformance, FullReceiveQueueIsEAGAIN) {
  PairOptions opt = Options();
  opt.attr.recv_depth = 4;
  opt.client_recvs = 4;
  opt.server_recvs = 4;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  RecvWork w;
  w.id = 99;
  w.addr = pair.server_buf.addr;
  w.length = 16;
  EXPECT_EQ(pair.server->PostRecv(w).code(), EAGAIN);
  // A completed and reaped receive frees its slot.
  ASSERT_TRUE(pair.client->PostSend(OneSegment(1, 1, "m", 1)).ok());
  ASSERT_EQ(WaitCompletions(pair.server.get(), 1).size(), 1u);
  EXPECT_TRUE(pair.server->PostRecv(w).ok());
}

TEST_P(ProviderConformance, ArmReturnsFalseWhenCompletionWaiting) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Options(), &pair));
  ASSERT_TRUE(pair.client->PostSend(OneSegment(1, 1, "m", 1)).ok());
  EXPECT_FALSE(pair.server->Arm());
  ASSERT_EQ(WaitCompletions(pair.server.get(), 1).size(), 1u);
  EXPECT_TRUE(pair.server->Arm());
}

// The waiter arms, finds nothing, and sleeps in poll(2) on notify_fd; a send from another thread
// must wake it.
TEST_P(ProviderConformance, DoorbellWakesPollInAnotherThread) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Options(), &pair));
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(pair.server->Arm());
    pollfd idle{pair.server->notify_fd(), POLLIN, 0};
    ASSERT_EQ(poll(&idle, 1, 0), 0) << "notify_fd readable before anything was sent";
    std::atomic<int> woke{-1};
    std::thread waiter([&] {
      pollfd pfd{pair.server->notify_fd(), POLLIN, 0};
      woke = poll(&pfd, 1, 5000);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(round == 0 ? 50 : 1));
    ASSERT_TRUE(pair.client->PostSend(OneSegment(round, round, "ring", 4)).ok());
    waiter.join();
    EXPECT_EQ(woke.load(), 1);
    pair.server->ClearNotify();
    auto got = WaitCompletions(pair.server.get(), 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].imm, uint32_t(round));
    RecvWork w;
    w.id = 3000 + round;
    w.addr = pair.server_buf.addr;
    w.length = 4096;
    ASSERT_TRUE(pair.server->PostRecv(w).ok());
    ASSERT_EQ(WaitCompletions(pair.client.get(), 1).size(), 1u);
  }
}

TEST_P(ProviderConformance, DisconnectFlushesPeerWithConnReset) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Options(), &pair));
  ASSERT_TRUE(pair.server->Arm());
  pair.client->Disconnect();
  EXPECT_TRUE(pair.client->broken());
  // The sleeping peer is woken...
  pollfd pfd{pair.server->notify_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 5000), 1);
  pair.server->ClearNotify();
  // ...and all of its posted receives complete with ECONNRESET.
  auto got = WaitCompletions(pair.server.get(), 8);
  ASSERT_EQ(got.size(), 8u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].op, Op::kRecv);
    EXPECT_EQ(got[i].error, ECONNRESET);
    EXPECT_EQ(got[i].id, 2000 + i);
  }
  EXPECT_TRUE(pair.server->broken());
  EXPECT_EQ(pair.server->PostSend(OneSegment(1, 0, "x", 1)).code(), ECONNRESET);
  RecvWork w;
  w.addr = pair.server_buf.addr;
  w.length = 16;
  EXPECT_EQ(pair.server->PostRecv(w).code(), ECONNRESET);
  EXPECT_FALSE(pair.server->Arm());
  // The disconnecting side's own receives are flushed too.
  EXPECT_EQ(WaitCompletions(pair.client.get(), 8).size(), 8u);
}

TEST_P(ProviderConformance, PeerClosingEndpointBreaksConnection) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Options(), &pair));
  ASSERT_TRUE(pair.server->Arm());
  pair.client.reset();
  const uint64_t deadline = NowNs() + 2'000'000'000ull;
  while (!pair.server->broken() && NowNs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(pair.server->broken());
  pollfd pfd{pair.server->notify_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 0), 1);
  auto got = WaitCompletions(pair.server.get(), 8);
  ASSERT_EQ(got.size(), 8u);
  for (const Completion& c : got) EXPECT_EQ(c.error, ECONNRESET);
}

TEST_P(ProviderConformance, SendWithoutPostedReceiveBreaksConnection) {
  PairOptions opt = Options();
  opt.server_recvs = 0;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  Status s = pair.client->PostSend(OneSegment(1, 0, "x", 1));
  if (!s.ok()) {
    EXPECT_TRUE(pair.client->broken());
  }
  ExpectSenderBroken(pair.client.get(), s, 8);
  const uint64_t deadline = NowNs() + 2'000'000'000ull;
  while (!pair.server->broken() && NowNs() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(pair.server->broken());
}

TEST_P(ProviderConformance, SendLargerThanReceiveBreaksConnection) {
  PairOptions opt = Options();
  opt.recv_size = 64;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  char data[65] = {};
  Status s = pair.client->PostSend(OneSegment(1, 0, data, 65));
  if (!s.ok()) {
    EXPECT_TRUE(pair.client->broken());
  }
  ExpectSenderBroken(pair.client.get(), s, 8);
  auto got = WaitCompletions(pair.server.get(), 8);
  ASSERT_EQ(got.size(), 8u);
  for (const Completion& c : got) EXPECT_EQ(c.error, ECONNRESET);
  EXPECT_TRUE(pair.server->broken());
}

TEST_P(ProviderConformance, SendBeforeConnectIsENOTCONN) {
  auto client = provider()->CreateEndpoint(EndpointAttr());
  ASSERT_TRUE(client.ok());
  EXPECT_EQ(client.value()->PostSend(OneSegment(1, 0, "x", 1)).code(), ENOTCONN);
  Completion c[4];
  EXPECT_EQ(client.value()->Poll(c, 4), 0);
}

TEST_P(ProviderConformance, AllocateBufferRespectsBudgetAndAlignment) {
  EndpointAttr attr;
  attr.buffer_bytes = 64 * 1024;
  auto ep = provider()->CreateEndpoint(attr);
  ASSERT_TRUE(ep.ok());
  auto a = ep.value()->AllocateBuffer(100);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->addr) % 64, 0u);
  auto b = ep.value()->AllocateBuffer(1000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->addr) % 64, 0u);
  EXPECT_GE(b->addr, a->addr + 100);
  EXPECT_EQ(ep.value()->AllocateBuffer(64 * 1024).status().code(), ENOMEM);
}

// ---- Sends from registered application memory (kCapRegisteredSend) -----------------------------

// The pattern byte at `i` of round `round`.
uint8_t PatternByte(size_t i, int round) { return static_cast<uint8_t>(i * 131 + round * 17 + 5); }

// Posts `count` sends of `chunk` bytes from `base` (each split into two segments at an odd
// offset, so segment boundaries fall anywhere), ids from `first_id`.
void PostChunks(Endpoint* ep, const uint8_t* base, int count, uint32_t chunk, uint64_t first_id) {
  for (int i = 0; i < count; ++i) {
    SendWork w;
    w.id = first_id + i;
    w.imm = 0x5A000000u + i;
    w.num_segments = 2;
    const uint8_t* at = base + size_t(i) * chunk;
    w.segments[0] = Segment{at, 1001, 0};
    w.segments[1] = Segment{at + 1001, chunk - 1001, 0};
    Status s = ep->PostSend(w);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
}

class RegisteredSend : public ProviderConformance {
 protected:
  void SetUp() override {
    ProviderConformance::SetUp();
    if (IsSkipped()) return;
    if (!(provider()->capabilities() & kCapRegisteredSend)) {
      GTEST_SKIP() << GetParam() << " does not advertise kCapRegisteredSend";
    }
  }
  PairOptions Large() const {
    PairOptions opt = Options();
    opt.recv_size = 32768;
    opt.server_recvs = 8;
    opt.attr.recv_depth = 16;
    opt.attr.buffer_bytes = 1u << 20;
    return opt;
  }
};

// The contract: the provider reads registered memory in place, and once a send's completion is
// reaped the memory is the caller's again. Each round scribbles the source right after the
// completions, before looking at what arrived: the receiver must still hold the round's pattern.
// Three rounds reuse the same buffer, registering it afresh each time.
TEST_P(RegisteredSend, BytesExactAndBufferReusableAfterCompletion) {
  PairOptions opt = Large();
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  constexpr int kChunks = 8;
  constexpr uint32_t kChunk = 32768;
  std::vector<uint8_t> app(size_t(kChunks) * kChunk + 3);
  uint8_t* src = app.data() + 1;  // not aligned to anything
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < size_t(kChunks) * kChunk; ++i) src[i] = PatternByte(i, round);
    Result<MemoryRegion> reg = pair.client->RegisterSendMemory(src, size_t(kChunks) * kChunk);
    ASSERT_TRUE(reg.ok()) << reg.status().ToString();
    ASSERT_NO_FATAL_FAILURE(PostChunks(pair.client.get(), src, kChunks, kChunk, 100 * round));
    auto sent = WaitCompletions(pair.client.get(), kChunks);
    ASSERT_EQ(sent.size(), size_t(kChunks));
    for (int i = 0; i < kChunks; ++i) {
      EXPECT_EQ(sent[i].op, Op::kSend);
      EXPECT_EQ(sent[i].error, 0);
      EXPECT_EQ(sent[i].id, uint64_t(100 * round + i));
    }
    std::memset(app.data(), 0xEE, app.size());  // the caller's memory again
    ASSERT_TRUE(pair.client->DeregisterSendMemory(reg.value()).ok());
    auto got = WaitCompletions(pair.server.get(), kChunks);
    ASSERT_EQ(got.size(), size_t(kChunks));
    for (int i = 0; i < kChunks; ++i) {
      ASSERT_EQ(got[i].error, 0);
      ASSERT_EQ(got[i].length, kChunk);
      EXPECT_EQ(got[i].imm, 0x5A000000u + i);
      const size_t slot = (got[i].id - 2000) % kChunks;
      const uint8_t* landed =
          reinterpret_cast<const uint8_t*>(pair.server_buf.addr) + slot * kChunk;
      size_t bad = 0;
      for (size_t b = 0; b < kChunk; ++b) {
        bad += landed[b] != PatternByte(size_t(i) * kChunk + b, round);
      }
      EXPECT_EQ(bad, 0u) << "round " << round << " chunk " << i;
      RecvWork w;
      w.id = got[i].id + kChunks;
      w.addr = pair.server_buf.addr + slot * kChunk;
      w.length = kChunk;
      ASSERT_TRUE(pair.server->PostRecv(w).ok());
    }
  }
  EXPECT_FALSE(pair.client->broken());
}

// Refusals are errors that leave the connection as it was: a hole in the range (EFAULT), an
// empty range (EINVAL), too many regions at once (EBUSY), a region that is not one (EINVAL).
TEST_P(RegisteredSend, RefusalsAreErrorsAndTheConnectionGoesOn) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Large(), &pair));
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* map = mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  auto* pages = static_cast<uint8_t*>(map);
  ASSERT_EQ(munmap(pages + page, page), 0);  // a hole in the middle
  EXPECT_EQ(pair.client->RegisterSendMemory(pages, 3 * page).status().code(), EFAULT);
  EXPECT_EQ(pair.client->RegisterSendMemory(pages + page + 8, 16).status().code(), EFAULT);
  EXPECT_EQ(pair.client->RegisterSendMemory(pages, 0).status().code(), EINVAL);
  EXPECT_EQ(pair.client->RegisterSendMemory(nullptr, 16).status().code(), EINVAL);

  std::vector<uint8_t> app(4096 * (kMaxSendRegions + 1), 0x42);
  std::vector<MemoryRegion> held;
  for (int i = 0; i < kMaxSendRegions; ++i) {
    Result<MemoryRegion> r = pair.client->RegisterSendMemory(app.data() + 4096 * i, 4096);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    held.push_back(r.value());
  }
  EXPECT_EQ(
      pair.client->RegisterSendMemory(app.data() + 4096 * kMaxSendRegions, 4096).status().code(),
      EBUSY);
  MemoryRegion bogus = held[0];
  bogus.length += 1;
  EXPECT_EQ(pair.client->DeregisterSendMemory(bogus).code(), EINVAL);
  for (const MemoryRegion& r : held) EXPECT_TRUE(pair.client->DeregisterSendMemory(r).ok());
  EXPECT_EQ(pair.client->DeregisterSendMemory(held[0]).code(), EINVAL);  // already gone
  munmap(pages, page);
  munmap(pages + 2 * page, page);

  // Nothing of that touched the connection.
  EXPECT_FALSE(pair.client->broken());
  ASSERT_TRUE(pair.client->PostSend(OneSegment(7, 7, "still here", 10)).ok());
  auto got = WaitCompletions(pair.server.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].error, 0);
  EXPECT_EQ(0, std::memcmp(pair.server_buf.addr, "still here", 10));
}

// A key is never trusted: after its region is deregistered, a send naming the old key from the
// same memory is carried as any unregistered send is (copied), and arrives intact.
TEST_P(RegisteredSend, StaleKeyAfterDeregistrationIsNotUsed) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Large(), &pair));
  std::vector<uint8_t> app(20000);
  for (size_t i = 0; i < app.size(); ++i) app[i] = PatternByte(i, 9);
  Result<MemoryRegion> reg = pair.client->RegisterSendMemory(app.data(), app.size());
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  ASSERT_TRUE(pair.client->DeregisterSendMemory(reg.value()).ok());
  SendWork w = OneSegment(1, 1, app.data(), uint32_t(app.size()));
  w.segments[0].key = reg->key;
  ASSERT_TRUE(pair.client->PostSend(w).ok());
  auto sent = WaitCompletions(pair.client.get(), 1);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].error, 0);
  auto got = WaitCompletions(pair.server.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].length, app.size());
  EXPECT_EQ(0, std::memcmp(pair.server_buf.addr, app.data(), app.size()));
}

// The peer goes away while sends from registered memory are outstanding: every send still gets
// exactly one completion (delivered, or ECONNRESET), the sender's receives flush, nothing hangs,
// and the memory can be deregistered and freed afterwards.
TEST_P(RegisteredSend, PeerDeathMidSendCompletesEverySend) {
  PairOptions opt = Large();
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  constexpr int kChunks = 8;
  constexpr uint32_t kChunk = 32768;
  auto app = std::make_unique<uint8_t[]>(size_t(kChunks) * kChunk);
  for (size_t i = 0; i < size_t(kChunks) * kChunk; ++i) app[i] = PatternByte(i, 3);
  Result<MemoryRegion> reg = pair.client->RegisterSendMemory(app.get(), size_t(kChunks) * kChunk);
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  ASSERT_NO_FATAL_FAILURE(PostChunks(pair.client.get(), app.get(), kChunks, kChunk, 1));
  pair.server.reset();  // the peer dies with our sends in flight
  const size_t expect = kChunks + size_t(opt.client_recvs);
  auto got = WaitCompletions(pair.client.get(), expect, 20000);
  ASSERT_EQ(got.size(), expect);
  int sends = 0;
  for (const Completion& c : got) {
    if (c.op == Op::kSend) {
      ++sends;
      EXPECT_TRUE(c.error == 0 || c.error == ECONNRESET) << c.error;
    } else {
      EXPECT_EQ(c.error, ECONNRESET);
    }
  }
  EXPECT_EQ(sends, kChunks);
  EXPECT_TRUE(pair.client->broken());
  EXPECT_TRUE(pair.client->DeregisterSendMemory(reg.value()).ok());
  app.reset();
  Completion c[4];
  EXPECT_EQ(pair.client->Poll(c, 4), 0);
}

// RegisterSendMemory works exactly where kCapRegisteredSend is advertised (ENOTSUP elsewhere).
TEST_P(ProviderConformance, RegisterSendMemoryMatchesTheCapability) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Options(), &pair));
  char buf[64];
  Result<MemoryRegion> r = pair.client->RegisterSendMemory(buf, sizeof buf);
  if (!(provider()->capabilities() & kCapRegisteredSend)) {
    EXPECT_EQ(r.status().code(), ENOTSUP);
    return;
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->addr, reinterpret_cast<std::byte*>(buf));
  EXPECT_EQ(r->length, sizeof buf);
  EXPECT_TRUE(pair.client->DeregisterSendMemory(r.value()).ok());
}

INSTANTIATE_TEST_SUITE_P(fabric, RegisteredSend, ::testing::Values("shm", "loopback", "verbs"),
                         [](const auto& info) { return info.param; });

// The "fabric" prefix makes `ctest -R fabric` select these (ctest regexes are case-sensitive).
INSTANTIATE_TEST_SUITE_P(fabric, ProviderConformance, ::testing::Values("shm", "loopback", "verbs"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace san::fabric
