// The verbs provider beyond the conformance suite: the private-data codec (any host: it parses
// what a remote peer sends, so it gets a seeded random corpus), Reaches, a fork child holding a
// connection (defined behaviour, parent unaffected) and the unavailable case.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "sanlib/fabric/verbs/verbs_wire.h"
#include "verbs_test_util.h"

#ifdef SAN_TEST_HAVE_VERBS
#include <rdma/rdma_cma.h>

#include "sanlib/fabric/verbs/verbs_endpoint.h"
#endif

namespace san::fabric {
namespace {

using testing::ConnectPair;
using testing::OneSegment;
using testing::Pair;
using testing::PairOptions;
using testing::WaitCompletions;

TEST(VerbsWire, RequestRoundTripsEveryLength) {
  for (uint8_t len = 0; len <= ConnectData::kMax; ++len) {
    ConnectData d;
    d.length = len;
    for (uint8_t i = 0; i < len; ++i) d.bytes[i] = static_cast<uint8_t>(i * 31 + len);
    const verbs::RequestBlob blob = verbs::EncodeRequest(d);
    // The CM pads private data: decoding must work from the padded size too.
    uint8_t padded[verbs::RequestBlob::kMaxPrivateData] = {};
    std::memcpy(padded, blob.bytes, sizeof blob.bytes);
    for (size_t size : {sizeof blob.bytes, sizeof padded}) {
      Result<ConnectData> back = verbs::DecodeRequest(padded, size);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      ASSERT_EQ(back->length, len);
      EXPECT_EQ(0, std::memcmp(back->bytes, d.bytes, len));
    }
  }
}

TEST(VerbsWire, BadRequestsAreEPROTO) {
  const verbs::RequestBlob good = verbs::EncodeRequest(ConnectData{});
  EXPECT_EQ(verbs::DecodeRequest(nullptr, 0).status().code(), EPROTO);
  EXPECT_EQ(verbs::DecodeRequest(good.bytes, 3).status().code(), EPROTO);
  verbs::RequestBlob bad = good;
  bad.bytes[0] ^= 1;
  EXPECT_EQ(verbs::DecodeRequest(bad.bytes, sizeof bad.bytes).status().code(), EPROTO);
  bad = good;
  bad.bytes[2] = 99;
  EXPECT_EQ(verbs::DecodeRequest(bad.bytes, sizeof bad.bytes).status().code(), EPROTO);
  bad = good;
  bad.bytes[3] = ConnectData::kMax + 1;
  EXPECT_EQ(verbs::DecodeRequest(bad.bytes, sizeof bad.bytes).status().code(), EPROTO);
  bad.bytes[3] = 10;  // claims 10 bytes, 6 delivered
  EXPECT_EQ(verbs::DecodeRequest(bad.bytes, 4 + 6).status().code(), EPROTO);
}

// A seeded random corpus (the replay of what a fuzzer would try): never crashes, never reads
// beyond the given length (ASan), accepts only well-formed blobs.
TEST(VerbsWire, RandomPrivateDataNeverCrashes) {
  std::mt19937 rng(20261123);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    const size_t size = rng() % 64;
    std::vector<uint8_t> bytes(size);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    if (size >= 3 && round % 2 == 0) {  // half of them past the magic and version
      bytes[0] = 0x53;
      bytes[1] = 0x56;
      bytes[2] = verbs::RequestBlob::kVersion;
    }
    Result<ConnectData> d = verbs::DecodeRequest(size ? bytes.data() : nullptr, size);
    if (d.ok()) {
      ++accepted;
      EXPECT_LE(d->length, ConnectData::kMax);
      EXPECT_LE(4u + d->length, size);
    }
  }
  EXPECT_GT(accepted, 0);
}

TEST(VerbsProvider, UnavailableSaysWhy) {
  if (GetProvider("verbs") != nullptr) {
    EXPECT_EQ(WhyUnavailable("verbs"), nullptr);
    return;
  }
  const char* why = WhyUnavailable("verbs");
  ASSERT_NE(why, nullptr);
  EXPECT_NE(std::strstr(why, "verbs"), nullptr) << why;
}

class VerbsProviderTest : public ::testing::Test {
 protected:
  void SetUp() override { SAN_SKIP_WITHOUT_VERBS(); }
  Provider* provider() { return GetProvider("verbs"); }
  PairOptions Options() {
    PairOptions opt;
    opt.listen_ip = opt.connect_ip = verbs_testing::VerbsIp();
    return opt;
  }
};

TEST_F(VerbsProviderTest, ReachesDeviceAddressesNotLoopback) {
  sockaddr_in device = testing::Ipv4(verbs_testing::VerbsIp(), 1);
  EXPECT_TRUE(provider()->Reaches(testing::Sa(device), sizeof device));
  sockaddr_in loop = testing::Ipv4("127.0.0.1", 1);
  EXPECT_FALSE(provider()->Reaches(testing::Sa(loop), sizeof loop));  // shm's
  EXPECT_EQ(provider()->capabilities() & kCapTransferable, 0u);
}

// A fork child that holds a connection of its parent: every call behaves as on a broken
// connection, destroying the endpoints there releases nothing of the parent's, and the parent's
// connection carries on.
TEST_F(VerbsProviderTest, ForkChildSeesBrokenConnectionParentCarriesOn) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), Options(), &pair));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int bad = 0;
    bad += !pair.client->broken();
    bad += pair.client->PostSend(OneSegment(1, 1, "x", 1)).code() != ECONNRESET;
    Completion c[16];
    bad += pair.client->Poll(c, 16) != 8;  // its 8 receives, flushed (this process's view)
    bad += pair.client->Arm();
    pair.client.reset();
    pair.server.reset();
    pair.listener.reset();
    _exit(bad);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_FALSE(pair.client->broken());
  EXPECT_FALSE(pair.server->broken());
  ASSERT_TRUE(pair.client->PostSend(OneSegment(7, 0xabc, "after", 5)).ok());
  auto got = WaitCompletions(pair.server.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].error, 0);
  EXPECT_EQ(got[0].imm, 0xabcu);
  EXPECT_EQ(0, std::memcmp(pair.server_buf.addr, "after", 5));
  got = WaitCompletions(pair.client.get(), 1);  // the send's own completion
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].op, Op::kSend);
  EXPECT_EQ(got[0].id, 7u);
  ASSERT_TRUE(pair.server->PostSend(OneSegment(8, 0xdef, "back", 4)).ok());
  got = WaitCompletions(pair.client.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].op, Op::kRecv);
  EXPECT_EQ(got[0].imm, 0xdefu);
}

// Sends from registered memory (AllocateBuffer: no copy), from the stack (inline) and from the
// heap beyond the inline size (bounce slot) all arrive intact.
TEST_F(VerbsProviderTest, RegisteredInlineAndBouncedSendsArrive) {
  PairOptions opt = Options();
  opt.recv_size = 65536;
  opt.attr.buffer_bytes = 2u << 20;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  auto staging = pair.client->AllocateBuffer(65536);
  ASSERT_TRUE(staging.ok());
  for (size_t i = 0; i < 65536; ++i) staging->addr[i] = static_cast<std::byte>(i * 13);
  std::vector<uint8_t> heap(40000);
  for (size_t i = 0; i < heap.size(); ++i) heap[i] = static_cast<uint8_t>(i * 7);
  struct Case {
    const void* data;
    uint32_t length;
    uint32_t key;
  } cases[] = {{staging->addr, 65536, staging->key}, {"tiny", 4, 0}, {heap.data(), 40000, 0}};
  int i = 0;
  for (const Case& c : cases) {
    SendWork w = OneSegment(i, 100 + i, c.data, c.length);
    w.segments[0].key = c.key;
    ASSERT_TRUE(pair.client->PostSend(w).ok());
    auto got = WaitCompletions(pair.server.get(), 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].length, c.length);
    EXPECT_EQ(0, std::memcmp(pair.server_buf.addr + size_t(i) * opt.recv_size, c.data, c.length));
    ASSERT_EQ(WaitCompletions(pair.client.get(), 1).size(), 1u);
    ++i;
  }
}

#ifdef SAN_TEST_HAVE_VERBS
// Registered application memory is read in place by the NIC (no bounce copy): the endpoint's
// counters say which way each send's bytes went. After deregistration the same memory is bounced
// again (the old key is not trusted). Needs kCapRegisteredSend (a kernel that copies pinned pages
// at fork by itself).
TEST_F(VerbsProviderTest, RegisteredApplicationMemoryIsSentInPlace) {
  if (!(provider()->capabilities() & kCapRegisteredSend)) {
    GTEST_SKIP() << "no kCapRegisteredSend: ibv_is_fork_initialized() is not IBV_FORK_UNNEEDED";
  }
  PairOptions opt = Options();
  opt.recv_size = 65536;
  opt.attr.buffer_bytes = 2u << 20;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(provider(), opt, &pair));
  auto* client = dynamic_cast<verbs::VerbsEndpoint*>(pair.client.get());
  ASSERT_NE(client, nullptr);
  std::vector<uint8_t> heap(3 * 65536);
  for (size_t i = 0; i < heap.size(); ++i) heap[i] = static_cast<uint8_t>(i * 11 + 1);
  Result<MemoryRegion> reg = pair.client->RegisterSendMemory(heap.data(), heap.size());
  ASSERT_TRUE(reg.ok()) << reg.status().ToString();
  const verbs::VerbsEndpoint::SendCounters before = client->send_counters();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pair.client->PostSend(OneSegment(i, i, heap.data() + 65536 * i, 65536)).ok());
  }
  ASSERT_EQ(WaitCompletions(pair.client.get(), 3).size(), 3u);
  const verbs::VerbsEndpoint::SendCounters in_place = client->send_counters();
  EXPECT_EQ(in_place.in_place_bytes - before.in_place_bytes, 3u * 65536);
  EXPECT_EQ(in_place.bounced_bytes, before.bounced_bytes);
  auto got = WaitCompletions(pair.server.get(), 3);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].length, 65536u);
    EXPECT_EQ(0, std::memcmp(pair.server_buf.addr + size_t(i) * opt.recv_size,
                             heap.data() + 65536 * i, 65536));
  }
  ASSERT_TRUE(pair.client->DeregisterSendMemory(reg.value()).ok());
  SendWork w = OneSegment(9, 9, heap.data(), 65536);
  w.segments[0].key = reg->key;
  ASSERT_TRUE(pair.client->PostSend(w).ok());
  ASSERT_EQ(WaitCompletions(pair.client.get(), 1).size(), 1u);
  EXPECT_EQ(client->send_counters().bounced_bytes - in_place.bounced_bytes, 65536u);
  EXPECT_EQ(client->send_counters().in_place_bytes, in_place.in_place_bytes);
  ASSERT_EQ(WaitCompletions(pair.server.get(), 1).size(), 1u);
}

// Waits up to 5 s for the next event on `ch`; returns its type, or -1.
int NextEvent(rdma_event_channel* ch) {
  pollfd p{ch->fd, POLLIN, 0};
  if (poll(&p, 1, 5000) != 1) return -1;
  rdma_cm_event* e = nullptr;
  if (rdma_get_cm_event(ch, &e) != 0) return -1;
  const int type = e->event;
  rdma_ack_cm_event(e);
  return type;
}

// A peer that is not sanlib (here: librdmacm by hand) sends private data that does not decode:
// the listener rejects it (the peer sees REJECTED), hands nothing to the server, and keeps serving.
TEST_F(VerbsProviderTest, ForeignPrivateDataIsRejectedListenerCarriesOn) {
  const uint16_t port = testing::NextPort();
  sockaddr_in addr = testing::Ipv4(verbs_testing::VerbsIp(), port);
  auto listener = provider()->Listen(testing::Sa(addr), sizeof addr, EndpointAttr());
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  std::atomic<bool> stop{false};
  std::atomic<int> handed_out{0};
  std::thread server([&] {
    while (!stop) {
      pollfd p{listener.value()->fd(), POLLIN, 0};
      poll(&p, 1, 20);
      auto r = listener.value()->GetRequest();
      if (r.ok()) ++handed_out;
    }
  });
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&addr), 2000), 0);
  EXPECT_EQ(NextEvent(ch), RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
  EXPECT_EQ(NextEvent(ch), RDMA_CM_EVENT_ROUTE_RESOLVED);
  ibv_qp_init_attr qa{};
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
  qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
  ASSERT_EQ(rdma_create_qp(id, nullptr, &qa), 0);
  const char garbage[] = "not a sanlib request";
  rdma_conn_param param{};
  param.private_data = garbage;
  param.private_data_len = sizeof garbage;
  ASSERT_EQ(rdma_connect(id, &param), 0);
  EXPECT_EQ(NextEvent(ch), RDMA_CM_EVENT_REJECTED);
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
  stop = true;
  server.join();
  EXPECT_EQ(handed_out.load(), 0);
  // The listener still serves sanlib clients.
  auto client = provider()->CreateEndpoint(EndpointAttr());
  ASSERT_TRUE(client.ok());
  Status connected;
  std::thread t([&] { connected = client.value()->Connect(testing::Sa(addr), sizeof addr, {}); });
  auto request = testing::WaitRequest(listener.value().get());
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_TRUE(request.value()->Accept().ok());
  t.join();
  EXPECT_TRUE(connected.ok()) << connected.ToString();
}
#endif

}  // namespace
}  // namespace san::fabric
