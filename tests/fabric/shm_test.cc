// shm-only tests: two real processes, hostile peers, peer death, bad segments, fork.
// Suite names start with "fabric" so `ctest -R fabric` selects them (ctest regexes are
// case-sensitive).
#include <fcntl.h>
#include <ifaddrs.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "fabric_test_util.h"
#include "sanlib/fabric/registry.h"
#include "sanlib/fabric/shm/rendezvous.h"
#include "sanlib/fabric/shm/shm_endpoint.h"
#include "sanlib/fabric/shm/shm_layout.h"
#include "sanlib/fabric/shm/shm_provider.h"
#include "seccomp_util.h"

namespace san::fabric {
namespace {

using shm::ShmEndpoint;
using testing::ConnectPair;
using testing::OneSegment;
using testing::Pair;
using testing::PairOptions;
using testing::WaitCompletions;

Provider* Shm() { return GetProvider("shm"); }

uint64_t Pattern(uint64_t message, uint64_t word) {
  return (message * 0x9E3779B97F4A7C15ull) ^ (word * 0xC2B2AE3D27D4EB4Full) ^ 0x5851F42D4C957F2Dull;
}

// Runs `body` in a forked child; returns its exit status (0 = success).
template <typename F>
int RunChild(F body) {
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// 64 MiB in 32 KiB messages from a child process to its parent, each message a known pattern,
// with credit-based flow control back to the child (the protocol layer's job, done by hand here).
TEST(fabric_shm, TwoProcessesMove64MiBWithChecksums) {
  constexpr uint32_t kMsg = 32768, kDepth = 32;
  constexpr uint64_t kTotal = 64ull << 20, kMessages = kTotal / kMsg;
  EndpointAttr attr;
  attr.recv_depth = kDepth;
  attr.send_depth = kDepth;
  attr.buffer_bytes = 2u << 20;
  const uint16_t port = testing::NextPort();
  sockaddr_in addr = testing::Ipv4("127.0.0.1", port);
  auto listener = Shm()->Listen(testing::Sa(addr), sizeof(addr), attr);
  ASSERT_TRUE(listener.ok());

  pid_t child = fork();
  if (child == 0) {
    // Sender. Exit codes name the step that failed.
    auto ep = Shm()->CreateEndpoint(attr);
    if (!ep.ok()) _exit(10);
    Endpoint* e = ep.value().get();
    auto credit_buf = e->AllocateBuffer(kDepth * 64);
    if (!credit_buf.ok()) _exit(11);
    for (uint32_t i = 0; i < kDepth; ++i) {
      RecvWork w{i, credit_buf->addr + i * 64, 64, 0};
      if (!e->PostRecv(w).ok()) _exit(12);
    }
    if (!e->Connect(testing::Sa(addr), sizeof(addr), {}).ok()) _exit(13);
    std::vector<uint64_t> msg(kMsg / 8);
    uint64_t sent = 0, credits = kDepth, unreaped = 0, checksum = 0;
    Completion c[32];
    while (sent < kMessages) {
      if (credits > 0 && unreaped < kDepth) {
        for (size_t w = 0; w < msg.size(); ++w) {
          msg[w] = Pattern(sent, w);
          checksum += msg[w];
        }
        if (!e->PostSend(OneSegment(sent, uint32_t(sent), msg.data(), kMsg)).ok()) _exit(14);
        ++sent;
        --credits;
        ++unreaped;
      }
      int k = e->Poll(c, 32);
      for (int i = 0; i < k; ++i) {
        if (c[i].error != 0) _exit(15);
        if (c[i].op == Op::kSend) {
          --unreaped;
        } else {
          credits += c[i].imm;
          RecvWork w{c[i].id, credit_buf->addr + c[i].id * 64, 64, 0};
          if (!e->PostRecv(w).ok()) _exit(16);
        }
      }
    }
    // Final message: the checksum.
    while (credits == 0) {
      int k = e->Poll(c, 32);
      for (int i = 0; i < k; ++i) {
        if (c[i].op == Op::kRecv) credits += c[i].imm;
      }
    }
    if (!e->PostSend(OneSegment(~0ull, 0xFFFFFFFFu, &checksum, 8)).ok()) _exit(17);
    // Wait for the parent to confirm before tearing down.
    for (;;) {
      int k = e->Poll(c, 32);
      for (int i = 0; i < k; ++i) {
        if (c[i].op == Op::kRecv && c[i].imm == 0) _exit(0);
      }
      if (e->broken()) _exit(18);
    }
  }

  auto server = testing::WaitRequest(listener->get());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  Endpoint* e = server.value().get();
  auto buf = e->AllocateBuffer(size_t(kDepth) * kMsg);
  ASSERT_TRUE(buf.ok());
  testing::PostRecvs(e, buf.value(), kDepth, kMsg, 0);
  ASSERT_TRUE(e->Accept().ok());
  uint64_t received = 0, checksum = 0, their_checksum = 0, to_credit = 0, unreaped = 0;
  bool done = false;
  Completion c[32];
  const uint64_t deadline = NowNs() + 60'000'000'000ull;
  while (!done && NowNs() < deadline) {
    int k = e->Poll(c, 32);
    for (int i = 0; i < k; ++i) {
      ASSERT_EQ(c[i].error, 0);
      if (c[i].op == Op::kSend) {
        --unreaped;
        continue;
      }
      const std::byte* data = buf->addr + c[i].id * kMsg;
      if (c[i].imm == 0xFFFFFFFFu) {
        std::memcpy(&their_checksum, data, 8);
        done = true;
        break;
      }
      ASSERT_EQ(c[i].imm, uint32_t(received));
      ASSERT_EQ(c[i].length, kMsg);
      const auto* words = reinterpret_cast<const uint64_t*>(data);
      for (size_t w = 0; w < kMsg / 8; ++w) {
        ASSERT_EQ(words[w], Pattern(received, w)) << "message " << received << " word " << w;
        checksum += words[w];
      }
      ++received;
      RecvWork w{c[i].id, buf->addr + c[i].id * kMsg, kMsg, 0};
      ASSERT_TRUE(e->PostRecv(w).ok());
      ++to_credit;
    }
    if (to_credit >= kDepth / 2 && unreaped < 4) {
      uint8_t dummy = 0;
      ASSERT_TRUE(e->PostSend(OneSegment(1, uint32_t(to_credit), &dummy, 1)).ok());
      ++unreaped;
      to_credit = 0;
    }
  }
  ASSERT_TRUE(done);
  EXPECT_EQ(received, kMessages);
  EXPECT_EQ(checksum, their_checksum);
  ASSERT_TRUE(e->PostSend(OneSegment(2, 0, "k", 1)).ok());
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A peer that is SIGKILLed never says goodbye; EOF on the rendezvous socket must still show up as
// broken() (and wake a sleeper) within bounded time.
// Provider::Dial (what the late move's upper end does before it builds an endpoint): refused at
// once where no listener is, and a dialled socket is taken over by Connect, which then works as
// one that connected itself; a Connect that fails still closes the socket it was given.
TEST(fabric_shm, DialRefusesAtOnceAndConnectTakesTheDialledSocket) {
  Provider* shm = GetProvider("shm");
  ASSERT_NE(shm, nullptr);
  const sockaddr_in nobody = testing::Ipv4("127.0.0.1", testing::NextPort());
  Result<UniqueFd> refused = shm->Dial(testing::Sa(nobody), sizeof nobody);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ECONNREFUSED) << refused.status().ToString();

  PairOptions opt;
  opt.dial_first = true;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(shm, opt, &pair));
  ASSERT_TRUE(pair.client->PostSend(OneSegment(1, 7, "hi", 2)).ok());
  std::vector<Completion> got = WaitCompletions(pair.server.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].imm, 7u);
  EXPECT_EQ(got[0].length, 2u);

  // Connected already: EISCONN, and the dialled socket it was handed is closed, not leaked.
  const sockaddr_in other = testing::Ipv4("127.0.0.1", testing::NextPort());
  Result<std::unique_ptr<Listener>> second =
      shm->Listen(testing::Sa(other), sizeof other, EndpointAttr());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  Result<UniqueFd> dialed = shm->Dial(testing::Sa(other), sizeof other);
  ASSERT_TRUE(dialed.ok()) << dialed.status().ToString();
  ConnectData data;
  data.dialed_fd = dialed.value().release();
  EXPECT_EQ(pair.client->Connect(testing::Sa(other), sizeof other, data).code(), EISCONN);
  EXPECT_EQ(fcntl(data.dialed_fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

// ConnectData::answer_later (the late move's upper end, inside an application's data call):
// Connect returns EINPROGRESS as soon as its request is sent, FinishConnect(0) says EINPROGRESS
// until the listener answered and then connects as Connect would have -- all in one thread, which
// a waiting Connect could not do. A refusal comes out of FinishConnect, and so does a listener
// that never answers, once Connect's bound has passed.
TEST(fabric_shm, ConnectCanTakeTheAnswerLater) {
  Provider* shm = GetProvider("shm");
  ASSERT_NE(shm, nullptr);
  const sockaddr_in addr = testing::Ipv4("127.0.0.1", testing::NextPort());
  Result<std::unique_ptr<Listener>> listener = shm->Listen(testing::Sa(addr), sizeof addr, {});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  ConnectData later;
  later.answer_later = true;
  later.timeout_ms = 300;

  auto client = shm->CreateEndpoint(EndpointAttr());
  ASSERT_TRUE(client.ok());
  auto client_buf = client.value()->AllocateBuffer(4 * 4096);
  ASSERT_TRUE(client_buf.ok());
  ASSERT_NO_FATAL_FAILURE(testing::PostRecvs(client.value().get(), *client_buf, 4, 4096, 1000));
  Status st = client.value()->Connect(testing::Sa(addr), sizeof addr, later);
  ASSERT_EQ(st.code(), EINPROGRESS) << st.ToString();
  EXPECT_EQ(client.value()->FinishConnect(0).code(), EINPROGRESS);
  auto server = testing::WaitRequest(listener->get());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto server_buf = server.value()->AllocateBuffer(4 * 4096);
  ASSERT_TRUE(server_buf.ok());
  ASSERT_NO_FATAL_FAILURE(testing::PostRecvs(server.value().get(), *server_buf, 4, 4096, 2000));
  ASSERT_TRUE(server.value()->Accept().ok());
  st = client.value()->FinishConnect(1000);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_TRUE(client.value()->FinishConnect(0).ok());  // done already
  ASSERT_TRUE(client.value()->PostSend(OneSegment(1, 9, "ok", 2)).ok());
  std::vector<Completion> got = WaitCompletions(server.value().get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].imm, 9u);

  auto refused = shm->CreateEndpoint(EndpointAttr());
  ASSERT_TRUE(refused.ok());
  ASSERT_EQ(refused.value()->Connect(testing::Sa(addr), sizeof addr, later).code(), EINPROGRESS);
  auto second = testing::WaitRequest(listener->get());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second.value()->Reject(ECONNREFUSED).ok());
  EXPECT_EQ(refused.value()->FinishConnect(1000).code(), ECONNREFUSED);
  EXPECT_EQ(refused.value()->FinishConnect(0).code(), ENOTCONN);  // the failure was final

  auto unanswered = shm->CreateEndpoint(EndpointAttr());
  ASSERT_TRUE(unanswered.ok());
  const uint64_t start = NowNs();
  ASSERT_EQ(unanswered.value()->Connect(testing::Sa(addr), sizeof addr, later).code(),
            EINPROGRESS);
  Status last;
  while ((last = unanswered.value()->FinishConnect(50)).code() == EINPROGRESS) {
    ASSERT_LT(NowNs() - start, 5000000000ull) << "still in progress long after its 300 ms";
  }
  EXPECT_EQ(last.code(), ETIMEDOUT) << last.ToString();
  EXPECT_GE(NowNs() - start, 300000000ull);
}

TEST(fabric_shm, SigkilledPeerIsDetected) {
  const uint16_t port = testing::NextPort();
  sockaddr_in addr = testing::Ipv4("127.0.0.1", port);
  auto listener = Shm()->Listen(testing::Sa(addr), sizeof(addr), EndpointAttr());
  ASSERT_TRUE(listener.ok());
  pid_t child = fork();
  if (child == 0) {
    auto ep = Shm()->CreateEndpoint(EndpointAttr());
    if (!ep.ok() || !ep.value()->Connect(testing::Sa(addr), sizeof(addr), {}).ok()) _exit(1);
    for (;;) pause();
  }
  auto server = testing::WaitRequest(listener->get());
  ASSERT_TRUE(server.ok());
  Endpoint* e = server.value().get();
  auto buf = e->AllocateBuffer(4 * 4096);
  ASSERT_TRUE(buf.ok());
  testing::PostRecvs(e, buf.value(), 4, 4096, 0);
  ASSERT_TRUE(e->Accept().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(e->broken());
  ASSERT_TRUE(e->Arm());

  const uint64_t t0 = NowNs();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  pollfd pfd{e->notify_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 2000), 1) << "sleeper not woken by peer death";
  e->ClearNotify();
  EXPECT_TRUE(e->broken());
  EXPECT_LT(NowNs() - t0, 2'000'000'000ull);
  auto got = WaitCompletions(e, 4);
  ASSERT_EQ(got.size(), 4u);
  for (const Completion& c : got) EXPECT_EQ(c.error, ECONNRESET);
}

// A spinning poller (no Arm, no broken() calls) notices a dead peer by itself.
TEST(fabric_shm, SpinningPollerNoticesDeadPeer) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), PairOptions(), &pair));
  pair.client.reset();
  // A bound, not a timing: the wait ends as soon as the flushed completions come.
  auto got = WaitCompletions(pair.server.get(), 8, 10000);
  ASSERT_EQ(got.size(), 8u);
  for (const Completion& c : got) EXPECT_EQ(c.error, ECONNRESET);
}

ShmEndpoint* AsShm(Endpoint* e) { return dynamic_cast<ShmEndpoint*>(e); }

shm::SideBlock* SideOf(ShmEndpoint* any, int side) {
  return reinterpret_cast<shm::SideBlock*>(any->segment_for_testing() +
                                           any->layout_for_testing().side_offset[side]);
}

PairOptions SmallPair() {
  PairOptions opt;
  opt.attr.buffer_bytes = 64 * 1024;
  opt.recv_size = 1024;
  return opt;
}

// Victim = server (side 1). It must report ECONNRESET, never crash or overread (run under ASan).
void ExpectVictimResets(Endpoint* victim) {
  auto got = WaitCompletions(victim, 8, 10000);
  ASSERT_EQ(got.size(), 8u);
  for (const Completion& c : got) EXPECT_EQ(c.error, ECONNRESET);
  EXPECT_TRUE(victim->broken());
}

TEST(fabric_shm, HostileCompletionSeqIsReset) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  SideOf(AsShm(pair.client.get()), 1)->completion_ring[0].seq.store(12345);
  ExpectVictimResets(pair.server.get());
}

TEST(fabric_shm, HostileCompletionLengthIsReset) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  auto& slot = SideOf(AsShm(pair.client.get()), 1)->completion_ring[0];
  slot.length.store(0xFFFFFFF0u);
  slot.seq.store(1);  // looks ready
  ExpectVictimResets(pair.server.get());
}

TEST(fabric_shm, HostileCompletionForUnpostedReceiveIsReset) {
  PairOptions opt = SmallPair();
  opt.server_recvs = 0;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), opt, &pair));
  auto& slot = SideOf(AsShm(pair.client.get()), 1)->completion_ring[0];
  slot.length.store(1);
  slot.seq.store(1);
  Completion c[4];
  EXPECT_EQ(pair.server->Poll(c, 4), 0);
  EXPECT_TRUE(pair.server->broken());
}

TEST(fabric_shm, HostileDescriptorOffsetsAndLengthsAreReset) {
  struct Case {
    uint64_t offset;
    uint32_t length;
    uint32_t seq;
  };
  const Case cases[] = {
      {~0ull, 16, 1},        // far outside the segment
      {0, 16, 1},            // the header, not the arena
      {~0ull - 8, 4096, 1},  // offset + length wraps
      {0, 0xFFFFFFFFu, 1},   // huge length
      {0, 16, 777},          // garbage sequence number
  };
  for (const Case& k : cases) {
    Pair pair;
    ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
    ShmEndpoint* client = AsShm(pair.client.get());
    auto& desc = SideOf(client, 0)->recv_ring[0];
    const uint64_t offset = k.offset == 0 ? 64 : k.offset;
    desc.offset.store(offset);
    desc.length.store(k.length);
    desc.seq.store(k.seq);
    // The victim (server) sends: it must refuse to copy and break, not crash.
    char data[16] = {};
    Status s = pair.server->PostSend(OneSegment(1, 0, data, sizeof(data)));
    EXPECT_EQ(s.code(), ECONNRESET) << s.ToString();
    EXPECT_TRUE(pair.server->broken());
    ExpectVictimResets(pair.server.get());
  }
  // A descriptor pointing into the victim's own arena is outside the peer's arena: refused too.
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  ShmEndpoint* client = AsShm(pair.client.get());
  auto& desc = SideOf(client, 0)->recv_ring[0];
  desc.offset.store(client->layout_for_testing().arena_offset[1]);
  EXPECT_EQ(pair.server->PostSend(OneSegment(1, 0, "x", 1)).code(), ECONNRESET);
}

// Random garbage over all shared control state, many times: the victim resets and never crashes.
TEST(fabric_shm, RandomScribblesNeverCrashTheVictim) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 40; ++round) {
    Pair pair;
    ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
    ShmEndpoint* client = AsShm(pair.client.get());
    auto* sides = reinterpret_cast<uint64_t*>(SideOf(client, 0));
    const size_t words = 2 * sizeof(shm::SideBlock) / 8;
    for (size_t i = 0; i < words; ++i) sides[i] = rng();
    char data[64] = {};
    Completion c[16];
    (void)pair.server->PostSend(OneSegment(1, 0, data, sizeof(data)));
    for (int i = 0; i < 4; ++i) (void)pair.server->Poll(c, 16);
    (void)pair.server->Arm();
    pair.server->ClearNotify();
    EXPECT_TRUE(pair.server->broken());
  }
}

// The hostile writer is another process scribbling while the victim polls.
TEST(fabric_shm, HostileProcessScribblingWhileVictimPolls) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  ShmEndpoint* client = AsShm(pair.client.get());
  shm::SideBlock* victim_side = SideOf(client, 1);
  pid_t child = fork();
  if (child == 0) {
    std::mt19937 rng(7);
    const uint64_t end = NowNs() + 200'000'000ull;
    while (NowNs() < end) {
      auto& slot = victim_side->completion_ring[rng() % 4];
      slot.length.store(rng());
      slot.seq.store(rng() % 3);
    }
    _exit(0);
  }
  auto got = WaitCompletions(pair.server.get(), 8, 5000);
  waitpid(child, nullptr, 0);
  // Some may have been "delivered" with in-bounds lengths before the first violation; after it,
  // everything is ECONNRESET and the connection is broken.
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got.back().error, ECONNRESET);
  for (const Completion& c : got) EXPECT_LE(c.length, 1024u);
  EXPECT_TRUE(pair.server->broken());
}

// Speaks the rendezvous by hand with a segment of our choosing.
struct RawRequest {
  int segment_fd;
  int doorbell_a;
  int doorbell_b;
  uint64_t arena = 64 * 1024;
  uint64_t magic = shm::kRendezvousMagic;
};

int SendRawRequest(const sockaddr_in& addr, Listener* listener, const RawRequest& r) {
  auto sock = shm::ConnectRendezvous(testing::Sa(addr), sizeof(addr));
  EXPECT_TRUE(sock.ok());
  if (!sock.ok()) return -1;
  shm::RequestMessage req{};
  req.magic = r.magic;
  req.version = shm::kRendezvousVersion;
  req.ring_slots = shm::kRingSlots;
  req.arena_bytes[0] = req.arena_bytes[1] = r.arena;
  const int fds[3] = {r.segment_fd, r.doorbell_a, r.doorbell_b};
  EXPECT_TRUE(shm::SendMessage(sock->get(), &req, sizeof(req), fds, 3).ok());
  auto ep = testing::WaitRequest(listener, 300);
  EXPECT_FALSE(ep.ok()) << "a bad request produced an endpoint";
  pollfd pfd{sock->get(), POLLIN, 0};
  if (poll(&pfd, 1, 2000) != 1) return -2;
  shm::ReplyMessage reply{};
  Status s = shm::ReceiveMessage(sock->get(), &reply, sizeof(reply), nullptr, 0);
  if (!s.ok()) return -3;
  return reply.error;
}

UniqueFd MakeSegment(size_t size, bool seal) {
  UniqueFd fd(memfd_create("test-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  EXPECT_EQ(ftruncate(fd.get(), off_t(size)), 0);
  auto* h = static_cast<shm::SegmentHeader*>(
      mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0));
  h->magic = shm::kSegmentMagic;
  h->version = shm::kSegmentVersion;
  h->ring_slots = shm::kRingSlots;
  h->arena_bytes[0] = h->arena_bytes[1] = 64 * 1024;
  h->total_bytes = shm::ComputeLayout(64 * 1024, 64 * 1024).total_bytes;
  munmap(h, 4096);
  if (seal) fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  return fd;
}

TEST(fabric_shm, BadSegmentsAndDoorbellsAreRejected) {
  const uint16_t port = testing::NextPort();
  sockaddr_in addr = testing::Ipv4("127.0.0.1", port);
  auto listener = Shm()->Listen(testing::Sa(addr), sizeof(addr), EndpointAttr());
  ASSERT_TRUE(listener.ok());
  const size_t good_size = shm::ComputeLayout(64 * 1024, 64 * 1024).total_bytes;
  UniqueFd a(eventfd(0, EFD_CLOEXEC)), b(eventfd(0, EFD_CLOEXEC));
  {
    UniqueFd seg = MakeSegment(good_size, /*seal=*/false);
    EXPECT_EQ(SendRawRequest(addr, listener->get(), {seg.get(), a.get(), b.get()}), EPERM);
  }
  {
    UniqueFd seg = MakeSegment(good_size - 4096, /*seal=*/true);
    EXPECT_EQ(SendRawRequest(addr, listener->get(), {seg.get(), a.get(), b.get()}), EINVAL);
  }
  {
    UniqueFd seg = MakeSegment(good_size + 4096, /*seal=*/true);
    EXPECT_EQ(SendRawRequest(addr, listener->get(), {seg.get(), a.get(), b.get()}), EINVAL);
  }
  {
    UniqueFd seg = MakeSegment(good_size, /*seal=*/true);
    RawRequest r{seg.get(), a.get(), b.get()};
    r.arena = 1ull << 40;  // absurd geometry
    EXPECT_EQ(SendRawRequest(addr, listener->get(), r), EINVAL);
    r.arena = 64 * 1024;
    r.magic = 0x1234;
    EXPECT_EQ(SendRawRequest(addr, listener->get(), r), EPROTO);
  }
  {
    UniqueFd seg = MakeSegment(good_size, /*seal=*/true);
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    UniqueFd r(pipe_fds[0]), w(pipe_fds[1]);
    EXPECT_EQ(SendRawRequest(addr, listener->get(), {seg.get(), w.get(), b.get()}), EPROTO);
  }
  {
    // The same, well formed, is accepted (so the cases above failed for the reason they test).
    UniqueFd seg = MakeSegment(good_size, /*seal=*/true);
    auto sock = shm::ConnectRendezvous(testing::Sa(addr), sizeof(addr));
    ASSERT_TRUE(sock.ok());
    shm::RequestMessage req{};
    req.magic = shm::kRendezvousMagic;
    req.version = shm::kRendezvousVersion;
    req.ring_slots = shm::kRingSlots;
    req.arena_bytes[0] = req.arena_bytes[1] = 64 * 1024;
    const int fds[3] = {seg.get(), a.get(), b.get()};
    ASSERT_TRUE(shm::SendMessage(sock->get(), &req, sizeof(req), fds, 3).ok());
    auto ep = testing::WaitRequest(listener->get());
    EXPECT_TRUE(ep.ok()) << ep.status().ToString();
  }
}

// A client that connects to the rendezvous and never sends its request does not block others.
TEST(fabric_shm, SilentClientDoesNotBlockListener) {
  const uint16_t port = testing::NextPort();
  sockaddr_in addr = testing::Ipv4("127.0.0.1", port);
  auto listener = Shm()->Listen(testing::Sa(addr), sizeof(addr), EndpointAttr());
  ASSERT_TRUE(listener.ok());
  auto silent = shm::ConnectRendezvous(testing::Sa(addr), sizeof(addr));
  ASSERT_TRUE(silent.ok());
  EXPECT_EQ(listener.value()->GetRequest().status().code(), EAGAIN);
  auto client = Shm()->CreateEndpoint(EndpointAttr());
  ASSERT_TRUE(client.ok());
  Status status;
  std::thread t([&] { status = client.value()->Connect(testing::Sa(addr), sizeof(addr), {}); });
  auto server = testing::WaitRequest(listener->get());
  ASSERT_TRUE(server.ok());
  EXPECT_TRUE(server.value()->Accept().ok());
  t.join();
  EXPECT_TRUE(status.ok()) << status.ToString();
}

// A listener on the wildcard is reachable through a non-loopback local address too.
TEST(fabric_shm, WildcardListenerReachableThroughLocalAddress) {
  std::string local;
  ifaddrs* list = nullptr;
  ASSERT_EQ(getifaddrs(&list), 0);
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
    if (std::strncmp(text, "127.", 4) != 0) {
      local = text;
      break;
    }
  }
  freeifaddrs(list);
  if (local.empty()) GTEST_SKIP() << "no non-loopback IPv4 address in this namespace";
  sockaddr_in there = testing::Ipv4(local.c_str(), 1);
  EXPECT_TRUE(Shm()->Reaches(testing::Sa(there), sizeof(there)));
  sockaddr_in elsewhere = testing::Ipv4("192.0.2.1", 1);  // TEST-NET-1, never local
  EXPECT_FALSE(Shm()->Reaches(testing::Sa(elsewhere), sizeof(elsewhere)));
  PairOptions opt;
  opt.listen_ip = "0.0.0.0";
  opt.connect_ip = local.c_str();
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), opt, &pair));
}

// After fork() the child carries on with the parent's endpoint object, then the parent does:
// both see the same ring positions because they live in shared memory.
TEST(fabric_shm, ForkChildAndParentShareTheConnection) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), PairOptions(), &pair));
  Endpoint* client = pair.client.get();
  int rc = RunChild([client] {
    if (!client->PostSend(OneSegment(1, 111, "child", 5)).ok()) return 1;
    Completion c;
    return client->Poll(&c, 1) == 1 && c.op == Op::kSend ? 0 : 2;
  });
  ASSERT_EQ(rc, 0);
  ASSERT_TRUE(client->PostSend(OneSegment(2, 222, "parent", 6)).ok());
  auto got = WaitCompletions(pair.server.get(), 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].imm, 111u);
  EXPECT_EQ(got[0].id, 2000u);
  EXPECT_EQ(got[1].imm, 222u);
  EXPECT_EQ(got[1].id, 2001u);
  EXPECT_EQ(0, std::memcmp(pair.server_buf.addr + 4096, "parent", 6));
  Completion c[4];
  EXPECT_EQ(client->Poll(c, 4), 1);  // only the parent's send is left to reap
  EXPECT_FALSE(pair.server->broken());
}

// ---- single copy (shm_window.cc) ---------------------------------------------------------------
// Both endpoints live in this process, so the "peer process" is this one: the window protocol
// and the kernel's process_vm_writev run for real, with the segment's window word exposed to
// scribbling.

std::vector<uint8_t> Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST(fabric_shm_window, ProviderAdvertisesSingleCopy) {
  EXPECT_NE(Shm()->capabilities() & kCapSingleCopy, 0u);
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  EXPECT_TRUE(pair.client->CanWriteWindows());
  EXPECT_TRUE(pair.server->CanWriteWindows());
  EXPECT_TRUE(pair.client->CanExposeWindows());
  EXPECT_TRUE(pair.server->CanExposeWindows());
  EXPECT_EQ(AsShm(pair.client.get())->peer_pid_for_testing(), getpid());
  EXPECT_EQ(AsShm(pair.server.get())->peer_pid_for_testing(), getpid());
}

TEST(fabric_shm_window, WriteThenRevokeSaysWritten) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  std::vector<uint8_t> buf(100000, 0xee);
  auto key = pair.server->ExposeWindow(buf.data(), 90000);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  EXPECT_EQ(pair.server->ExposeWindow(buf.data(), 10).status().code(), EBUSY);
  const std::vector<uint8_t> a = Bytes(50000, 1), b = Bytes(30000, 2);
  Segment segs[2] = {{a.data(), 50000, 0}, {b.data(), 30000, 0}};
  auto n = pair.client->WriteWindow(key.value(), segs, 2);
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n.value(), 80000u);
  EXPECT_EQ(pair.client->WriteWindow(key.value(), segs, 1).status().code(), ECANCELED);  // once
  auto fate = pair.server->RevokeWindow();
  ASSERT_TRUE(fate.ok());
  EXPECT_EQ(fate.value(), WindowFate::kWritten);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), buf.begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), buf.begin() + 50000));
  EXPECT_EQ(buf[80000], 0xee);
  EXPECT_EQ(pair.server->RevokeWindow().status().code(), EINVAL);
  // Larger than the window: refused before anything is claimed.
  key = pair.server->ExposeWindow(buf.data(), 100);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(pair.client->WriteWindow(key.value(), segs, 1).status().code(), EINVAL);
  EXPECT_EQ(pair.server->RevokeWindow().value(), WindowFate::kUnused);
  EXPECT_FALSE(pair.server->broken());
}

TEST(fabric_shm_window, RevokedOrStaleWindowIsNeverWritten) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  std::vector<uint8_t> buf(4096, 0xee);
  const std::vector<uint8_t> data = Bytes(4096, 3);
  Segment seg{data.data(), 4096, 0};
  auto first = pair.server->ExposeWindow(buf.data(), buf.size());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(pair.server->RevokeWindow().value(), WindowFate::kUnused);
  EXPECT_EQ(pair.client->WriteWindow(first.value(), &seg, 1).status().code(), ECANCELED);
  auto second = pair.server->ExposeWindow(buf.data(), buf.size());
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->generation, first->generation);
  EXPECT_EQ(pair.client->WriteWindow(first.value(), &seg, 1).status().code(), ECANCELED);
  EXPECT_EQ(buf, std::vector<uint8_t>(4096, 0xee));
  EXPECT_EQ(pair.client->WriteWindow(second.value(), &seg, 1).value(), 4096u);
  EXPECT_EQ(pair.server->RevokeWindow().value(), WindowFate::kWritten);
  EXPECT_EQ(buf, data);
}

// A key naming memory the exposer does not have (a lying or buggy peer): the kernel says EFAULT,
// the writer is unharmed and the connection lives on.
TEST(fabric_shm_window, BadAddressIsAnErrorNotACrash) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  std::vector<uint8_t> buf(4096);
  auto key = pair.server->ExposeWindow(buf.data(), buf.size());
  ASSERT_TRUE(key.ok());
  WindowKey bad = key.value();
  bad.addr = 0x1000;  // below vm.mmap_min_addr: never mapped
  const std::vector<uint8_t> data = Bytes(4096, 4);
  Segment seg{data.data(), 4096, 0};
  EXPECT_EQ(pair.client->WriteWindow(bad, &seg, 1).status().code(), EFAULT);
  EXPECT_EQ(pair.server->RevokeWindow().value(), WindowFate::kWritten);  // spent, nothing in it
  EXPECT_FALSE(pair.client->broken());
  EXPECT_TRUE(pair.client->CanWriteWindows());  // EFAULT is the peer's problem, not a refusal
}

TEST(fabric_shm_window, ScribbledWindowWordResetsTheExposer) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  std::vector<uint8_t> buf(4096);
  ASSERT_TRUE(pair.server->ExposeWindow(buf.data(), buf.size()).ok());
  SideOf(AsShm(pair.client.get()), 1)->window.store(0xdeadbeef);
  EXPECT_EQ(pair.server->RevokeWindow().status().code(), ECONNRESET);
  EXPECT_TRUE(pair.server->broken());
}

// A peer that claims the window and never finishes: the exposer waits a bounded time, then resets.
TEST(fabric_shm_window, WriterThatNeverFinishesIsBounded) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  std::vector<uint8_t> buf(4096);
  auto key = pair.server->ExposeWindow(buf.data(), buf.size());
  ASSERT_TRUE(key.ok());
  SideOf(AsShm(pair.client.get()), 1)
      ->window.store(shm::WindowWord(key->generation, shm::WindowState::kBusy));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(pair.server->RevokeWindow().status().code(), ECONNRESET);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_TRUE(pair.server->broken());
}

// A fork child holds the endpoint but is not the process the peer validated: it must not expose
// (the peer would write into the parent). Writing from the child still targets the validated peer.
TEST(fabric_shm_window, ForkChildDoesNotExpose) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(Shm(), SmallPair(), &pair));
  EXPECT_EQ(RunChild([&] {
              if (pair.server->CanExposeWindows()) return 1;
              std::vector<uint8_t> buf(64);
              if (pair.server->ExposeWindow(buf.data(), buf.size()).status().code() != EPERM) {
                return 2;
              }
              return 0;
            }),
            0);
  EXPECT_TRUE(pair.server->CanExposeWindows());
}

// Where the kernel refuses process_vm_writev (here a seccomp filter, which binds root too), the
// provider does not advertise kCapSingleCopy and a connection's probe says no.
TEST(fabric_shm_window, RefusedByTheKernel) {
  EXPECT_EQ(RunChild([] {
              if (!san::testing::DenyProcessVm()) return 1;
              shm::ShmProvider provider;
              if (provider.capabilities() & kCapSingleCopy) return 2;
              Pair pair;
              ConnectPair(&provider, SmallPair(), &pair);
              if (!pair.client || !pair.server) return 3;
              if (pair.client->CanWriteWindows()) return 4;
              std::vector<uint8_t> buf(64), data(64);
              auto key = pair.server->ExposeWindow(buf.data(), buf.size());
              if (!key.ok()) return 5;
              Segment seg{data.data(), 64, 0};
              if (pair.client->WriteWindow(key.value(), &seg, 1).status().code() != EPERM) return 6;
              if (pair.server->RevokeWindow().value() != WindowFate::kUnused) return 7;
              return ::testing::Test::HasFailure() ? 8 : 0;
            }),
            0);
}

}  // namespace
}  // namespace san::fabric
