// proto::Stream's single-copy path (docs/protocol.md "Single copy") over the loopback provider,
// which emulates kCapSingleCopy with a memcpy and injects the refusals and the write hold that
// make the races reproducible: the ADVERT/PUT handshake, a window larger or smaller than the
// message, withdrawal before, during and after the peer's write, ordering against data already in
// flight and against combined small sends, refusal at set-up and mid-connection, and a hostile
// peer's PUTs and ADVERTs.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "sanlib/proto/stream.h"
#include "sanlib/proto/wire.h"
#include "stream_test_util.h"

namespace san::proto {
namespace {

using testing::FaultPlan;
using testing::Loopback;
using testing::LoopbackProvider;
using testing::MtuOptions;
using testing::OpenPair;
using testing::PairOptions;
using testing::Pattern;
using testing::PumpUntil;
using testing::ReadExactly;
using testing::SharedLoopback;
using testing::StreamPair;

constexpr uint32_t kMtu = 4096;
constexpr size_t kMin = 8192;  // offer_min and window_min

Result<size_t> Send(Stream& s, const std::vector<uint8_t>& data, size_t window_min = kMin) {
  iovec iov{const_cast<uint8_t*>(data.data()), data.size()};
  return s.Send(&iov, 1, nullptr, window_min);
}

Result<size_t> Recv(Stream& s, std::vector<uint8_t>& buf, size_t offer_min = kMin) {
  iovec iov{buf.data(), buf.size()};
  return s.Recv(&iov, 1, false, offer_min);
}

// Everything of `data` from `from` reaches `to` by the ring (one thread), read in full.
void RingTransfer(StreamPair& p, Stream& from, Stream& to, const std::vector<uint8_t>& data) {
  size_t sent = 0;
  ASSERT_TRUE(PumpUntil(p, [&] {
    if (sent < data.size()) {
      iovec iov{const_cast<uint8_t*>(data.data() + sent), data.size() - sent};
      Result<size_t> r = from.Send(&iov, 1);
      if (r.ok()) sent += r.value();
    }
    return sent == data.size();
  }));
  EXPECT_TRUE(ReadExactly(p, to, data.size()) == data);
}

// A started pair over `provider` where the server has seen the client send a big message (Pattern
// `seed`), which is what makes it offer windows.
void OpenOffering(fabric::Provider* provider, const PairOptions& opt, uint32_t seed,
                  StreamPair* p) {
  ASSERT_NO_FATAL_FAILURE(OpenPair(provider, opt, p));
  ASSERT_NO_FATAL_FAILURE(RingTransfer(*p, *p->client, *p->server, Pattern(3 * kMtu, seed)));
}

class proto_stream_single_copy : public ::testing::Test {
 protected:
  // The server is the receiver in most tests.
  void Open(fabric::Provider* provider, const PairOptions& opt = MtuOptions(kMtu)) {
    OpenOffering(provider, opt, 1, &pair_);
  }
  void Open() { Open(SharedLoopback()); }
  Stream& client() { return *pair_.client; }
  Stream& server() { return *pair_.server; }
  // The server offers `buf` (nothing is queued) and the client reaps the ADVERT.
  void Offer(std::vector<uint8_t>& buf) {
    Result<size_t> r = Recv(server(), buf);
    ASSERT_EQ(r.status().code(), EAGAIN);
    ASSERT_TRUE(client().Progress().ok());
  }
  StreamPair pair_;
};

TEST_F(proto_stream_single_copy, BothSidesKnowTheyCanUseIt) {
  ASSERT_NO_FATAL_FAILURE(Open());
  EXPECT_TRUE(client().Stats().single_copy_out);
  EXPECT_TRUE(client().Stats().single_copy_in);
  EXPECT_TRUE(server().Stats().single_copy_out);
  EXPECT_TRUE(server().Stats().single_copy_in);
}

TEST_F(proto_stream_single_copy, HandshakeMovesTheMessageInOneWrite) {
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<uint8_t> buf(65536, 0xee);
  ASSERT_NO_FATAL_FAILURE(Offer(buf));
  EXPECT_EQ(server().Stats().windows_offered, 1u);
  const std::vector<uint8_t> msg = Pattern(40000, 2);
  Result<size_t> s = Send(client(), msg);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s.value(), msg.size());  // the whole message, one write, not MTU-sized packets
  EXPECT_EQ(client().Stats().single_copy_bytes_sent, msg.size());
  Result<size_t> r = Recv(server(), buf);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r.value(), msg.size());
  EXPECT_TRUE(std::equal(msg.begin(), msg.end(), buf.begin()));
  EXPECT_EQ(buf[msg.size()], 0xee);  // not a byte beyond the message
  EXPECT_EQ(server().WithdrawWindow(buf.data()).value(), 0u);
  EXPECT_EQ(server().Stats().windows_filled, 1u);
  EXPECT_EQ(server().Stats().single_copy_bytes_received, msg.size());
  // The stream carries on by the ring, in order.
  const std::vector<uint8_t> tail = Pattern(5000, 3);
  ASSERT_NO_FATAL_FAILURE(RingTransfer(pair_, client(), server(), tail));
}

TEST_F(proto_stream_single_copy, WindowSmallerThanTheMessageTakesItsStart) {
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<uint8_t> buf(10000);
  ASSERT_NO_FATAL_FAILURE(Offer(buf));
  const std::vector<uint8_t> msg = Pattern(40000, 4);
  Result<size_t> s = Send(client(), msg);
  ASSERT_EQ(s.value(), 10000u);  // what the window holds; the caller sends the rest
  Result<size_t> r = Recv(server(), buf);
  ASSERT_EQ(r.value(), 10000u);
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), msg.begin()));
  // The rest by the ring (the window is spent).
  const std::vector<uint8_t> rest(msg.begin() + 10000, msg.end());
  ASSERT_NO_FATAL_FAILURE(RingTransfer(pair_, client(), server(), rest));
}

TEST_F(proto_stream_single_copy, SmallSendIgnoresTheWindowAndTheReceiverTakesItBack) {
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<uint8_t> buf(65536);
  ASSERT_NO_FATAL_FAILURE(Offer(buf));
  const std::vector<uint8_t> small = Pattern(100, 5);
  ASSERT_EQ(Send(client(), small).value(), small.size());
  EXPECT_EQ(client().Stats().single_copy_bytes_sent, 0u);
  Result<size_t> r(Status(EAGAIN, ""));
  ASSERT_TRUE(PumpUntil(pair_, [&] {
    r = Recv(server(), buf);
    return r.ok();
  }));
  ASSERT_EQ(r.value(), small.size());
  EXPECT_TRUE(std::equal(small.begin(), small.end(), buf.begin()));
  // The window is gone: a large send now cannot use it (stale) and goes by the ring.
  const std::vector<uint8_t> big = Pattern(30000, 6);
  ASSERT_NO_FATAL_FAILURE(RingTransfer(pair_, client(), server(), big));
  EXPECT_EQ(client().Stats().single_copy_bytes_sent, 0u);
}

TEST_F(proto_stream_single_copy, WithdrawnBeforeTheSenderLooksMeansTheRing) {
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<uint8_t> buf(65536);
  ASSERT_EQ(Recv(server(), buf).status().code(), EAGAIN);
  // The receiver's call ends (timeout, EINTR) before the ADVERT was even reaped.
  EXPECT_EQ(server().WithdrawWindow(buf.data()).value(), 0u);
  const std::vector<uint8_t> msg = Pattern(30000, 7);
  ASSERT_NO_FATAL_FAILURE(RingTransfer(pair_, client(), server(), msg));
  EXPECT_EQ(client().Stats().single_copy_bytes_sent, 0u);
}

TEST_F(proto_stream_single_copy, WithdrawAfterTheWriteReturnsTheBytes) {
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<uint8_t> buf(65536);
  ASSERT_NO_FATAL_FAILURE(Offer(buf));
  const std::vector<uint8_t> msg = Pattern(20000, 8);
  ASSERT_EQ(Send(client(), msg).value(), msg.size());
  // The receiver's timeout fires right after the write: the bytes are its call's result.
  Result<size_t> w = server().WithdrawWindow(buf.data());
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w.value(), msg.size());
  EXPECT_TRUE(std::equal(msg.begin(), msg.end(), buf.begin()));
  EXPECT_EQ(server().WithdrawWindow(buf.data()).value(), 0u);  // idempotent
}

TEST_F(proto_stream_single_copy, DataInFlightIsNeverOvertaken) {
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<uint8_t> buf(65536);
  ASSERT_EQ(Recv(server(), buf).status().code(), EAGAIN);
  // Before the client reaps the ADVERT, a large send goes out by the ring; the window's stream
  // offset is now behind, so the next large send must not use it either.
  const std::vector<uint8_t> first = Pattern(9000, 9), second = Pattern(20000, 10);
  iovec a{const_cast<uint8_t*>(first.data()), first.size()};
  size_t sent = 0;
  ASSERT_TRUE(PumpUntil(pair_, [&] {
    if (sent < first.size()) {
      // Send without reaping first is not possible through the API; a zero window_min forces the
      // ring for this one while the ADVERT sits unreaped or reaped.
      iovec rest{static_cast<uint8_t*>(a.iov_base) + sent, first.size() - sent};
      Result<size_t> r = client().Send(&rest, 1, nullptr, 0);
      if (r.ok()) sent += r.value();
    }
    return sent == first.size();
  }));
  Result<size_t> s = Send(client(), second);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(client().Stats().single_copy_bytes_sent, 0u);
  std::vector<uint8_t> all(first);
  all.insert(all.end(), second.begin(), second.begin() + s.value());
  std::vector<uint8_t> got;
  ASSERT_TRUE(PumpUntil(pair_, [&] {
    Result<size_t> r = Recv(server(), buf);
    if (r.ok()) got.insert(got.end(), buf.begin(), buf.begin() + r.value());
    return got.size() >= all.size();
  }));
  server().WithdrawWindow(buf.data());
  EXPECT_TRUE(got == all);
}

TEST_F(proto_stream_single_copy, CombinedSmallSendsGoFirst) {
  ASSERT_NO_FATAL_FAILURE(Open(SharedLoopback(), MtuOptions(kMtu, /*nodelay=*/false)));
  // Open() left the client's priming packets unacknowledged (the server's credits wait for the
  // ACK threshold), so the window is not idle and a small send combines.
  std::vector<uint8_t> buf(65536);
  // A small send that stays in the combine buffer, then the window, then a large send: the
  // large one must not jump the buffered bytes.
  bool buffered = false;
  const std::vector<uint8_t> small = Pattern(10, 12);
  iovec si{const_cast<uint8_t*>(small.data()), small.size()};
  ASSERT_EQ(client().Send(&si, 1, &buffered, kMin).value(), small.size());
  ASSERT_TRUE(buffered);
  ASSERT_EQ(Recv(server(), buf).status().code(), EAGAIN);
  EXPECT_EQ(server().Stats().windows_offered, 1u);
  const std::vector<uint8_t> big = Pattern(30000, 13);
  std::vector<uint8_t> expect(small);
  size_t sent = 0;
  ASSERT_TRUE(PumpUntil(pair_, [&] {
    if (sent < big.size()) {
      iovec bi{const_cast<uint8_t*>(big.data() + sent), big.size() - sent};
      Result<size_t> r = client().Send(&bi, 1, nullptr, kMin);
      if (r.ok()) sent += r.value();
    }
    return sent == big.size();
  }));
  expect.insert(expect.end(), big.begin(), big.end());
  std::vector<uint8_t> got;
  ASSERT_TRUE(PumpUntil(pair_, [&] {
    client().Flush();
    Result<size_t> r = Recv(server(), buf);
    if (r.ok()) got.insert(got.end(), buf.begin(), buf.begin() + r.value());
    return got.size() >= expect.size();
  }));
  server().WithdrawWindow(buf.data());
  EXPECT_TRUE(got == expect);
}

TEST_F(proto_stream_single_copy, NoWindowsForAPeerThatSendsSmall) {
  ASSERT_NO_FATAL_FAILURE(OpenPair(SharedLoopback(), MtuOptions(kMtu), &pair_));
  ASSERT_NO_FATAL_FAILURE(RingTransfer(pair_, client(), server(), Pattern(100, 14)));
  std::vector<uint8_t> buf(65536);
  EXPECT_EQ(Recv(server(), buf).status().code(), EAGAIN);
  EXPECT_EQ(server().Stats().windows_offered, 0u);  // no ADVERT per small message
  EXPECT_EQ(Recv(server(), buf, 0).status().code(), EAGAIN);
  EXPECT_EQ(server().Stats().windows_offered, 0u);
}

TEST_F(proto_stream_single_copy, PeekAndSmallBuffersNeverOffer) {
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<uint8_t> buf(65536), small(kMin - 1);
  iovec iov{buf.data(), buf.size()};
  EXPECT_EQ(server().Recv(&iov, 1, /*peek=*/true, kMin).status().code(), EAGAIN);
  EXPECT_EQ(Recv(server(), small).status().code(), EAGAIN);
  EXPECT_EQ(server().Stats().windows_offered, 0u);
}

TEST_F(proto_stream_single_copy, AnotherBufferDoesNotTakeTheWindowsBytes) {
  ASSERT_NO_FATAL_FAILURE(Open());
  std::vector<uint8_t> mine(65536), other(65536);
  ASSERT_NO_FATAL_FAILURE(Offer(mine));
  const std::vector<uint8_t> msg = Pattern(20000, 15);
  ASSERT_EQ(Send(client(), msg).value(), msg.size());
  // A second reader with another buffer sees nothing of it (it is in `mine`).
  EXPECT_EQ(Recv(server(), other).status().code(), EAGAIN);
  EXPECT_EQ(server().WithdrawWindow(other.data()).value(), 0u);
  ASSERT_EQ(Recv(server(), mine).value(), msg.size());
  EXPECT_TRUE(std::equal(msg.begin(), msg.end(), mine.begin()));
}

TEST(proto_stream_single_copy_refused, AtSetUpNobodyOffers) {
  FaultPlan plan;
  plan.refuse_window_probe = true;
  LoopbackProvider provider(plan);
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenPair(&provider, MtuOptions(kMtu), &p));
  EXPECT_FALSE(p.client->Stats().single_copy_out);
  EXPECT_FALSE(p.server->Stats().single_copy_in);
  ASSERT_NO_FATAL_FAILURE(RingTransfer(p, *p.client, *p.server, Pattern(3 * kMtu, 16)));
  std::vector<uint8_t> buf(65536);
  EXPECT_EQ(Recv(*p.server, buf).status().code(), EAGAIN);
  EXPECT_EQ(p.server->Stats().windows_offered, 0u);
}

TEST(proto_stream_single_copy_refused, ProviderWithoutTheCapability) {
  FaultPlan plan;
  plan.no_single_copy = true;
  LoopbackProvider provider(plan);
  EXPECT_EQ(provider.capabilities() & fabric::kCapSingleCopy, 0u);
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenOffering(&provider, MtuOptions(kMtu), 17, &p));
  std::vector<uint8_t> buf(65536);
  EXPECT_EQ(Recv(*p.server, buf).status().code(), EAGAIN);
  EXPECT_EQ(p.server->Stats().windows_offered, 0u);
}

// The kernel refuses a write in the middle of the connection (a seccomp filter installed late, a
// peer that became non-dumpable): the sender declines with a PUT of 0, the message goes by the
// ring, and neither side tries again.
TEST(proto_stream_single_copy_refused, MidConnectionFallsBackCleanly) {
  FaultPlan plan;
  plan.refuse_window_write = 1;
  LoopbackProvider provider(plan);
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenOffering(&provider, MtuOptions(kMtu), 18, &p));
  std::vector<uint8_t> buf(65536);
  ASSERT_EQ(Recv(*p.server, buf).status().code(), EAGAIN);
  ASSERT_TRUE(p.client->Progress().ok());
  const std::vector<uint8_t> msg = Pattern(30000, 19);
  size_t sent = 0;
  ASSERT_TRUE(PumpUntil(p, [&] {
    if (sent < msg.size()) {
      iovec iov{const_cast<uint8_t*>(msg.data() + sent), msg.size() - sent};
      Result<size_t> r = p.client->Send(&iov, 1, nullptr, kMin);
      EXPECT_TRUE(r.ok() || r.status().would_block()) << r.status().ToString();
      if (r.ok()) sent += r.value();
    }
    return sent == msg.size();
  }));
  EXPECT_EQ(Loopback(*p.client).window_claims(), 1u);
  EXPECT_FALSE(p.client->Stats().single_copy_out);
  std::vector<uint8_t> got;
  ASSERT_TRUE(PumpUntil(p, [&] {
    Result<size_t> r = Recv(*p.server, buf);
    if (r.ok()) got.insert(got.end(), buf.begin(), buf.begin() + r.value());
    return got.size() >= msg.size();
  }));
  p.server->WithdrawWindow(buf.data());
  EXPECT_TRUE(got == msg);
  EXPECT_FALSE(p.server->Stats().single_copy_in);
  EXPECT_EQ(p.server->Stats().windows_offered, 1u);
  EXPECT_EQ(Recv(*p.server, buf).status().code(), EAGAIN);
  EXPECT_EQ(p.server->Stats().windows_offered, 1u);  // no more ADVERTs
  EXPECT_EQ(p.client->GetReadiness().error, 0);
  EXPECT_EQ(p.server->GetReadiness().error, 0);
}

// The cancel race: the writer has claimed the window and is still copying (held 30 ms) when the
// receiver's call ends. Withdrawing must wait for the write and return its bytes; it must not
// return while the buffer can still change.
TEST(proto_stream_single_copy_race, WithdrawWaitsForAWriteInProgress) {
  FaultPlan plan;
  plan.window_write_hold_us = 30000;
  LoopbackProvider provider(plan);
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenOffering(&provider, MtuOptions(kMtu), 20, &p));
  std::vector<uint8_t> buf(65536);
  ASSERT_EQ(Recv(*p.server, buf).status().code(), EAGAIN);
  ASSERT_TRUE(p.client->Progress().ok());
  const std::vector<uint8_t> msg = Pattern(50000, 21);
  Result<size_t> sent(Status(EAGAIN, ""));
  std::thread writer([&] { sent = Send(*p.client, msg); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Loopback(*p.client).window_claims() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(Loopback(*p.client).window_claims(), 1u);
  Result<size_t> w = p.server->WithdrawWindow(buf.data());
  // Withdraw returned: the write is complete and nothing will touch buf any more.
  const std::vector<uint8_t> snapshot(buf.begin(), buf.begin() + msg.size());
  writer.join();
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w.value(), msg.size());
  ASSERT_TRUE(sent.ok());
  EXPECT_EQ(sent.value(), msg.size());
  EXPECT_TRUE(snapshot == msg);
}

// Streams 8 MiB one way between two threads with single copy on, the receiver using random
// buffer sizes and withdrawing its window at random (as timeouts and signals would): every byte
// arrives once, in order. Under TSan this also checks the write/PUT publication.
TEST(proto_stream_single_copy_race, RandomWithdrawalsLoseNothing) {
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenPair(SharedLoopback(), MtuOptions(kMtu), &p));
  const std::vector<uint8_t> data = Pattern(8 << 20, 22);
  std::atomic<bool> failed{false};
  std::thread sender([&] {
    std::mt19937 rng(1);
    size_t at = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    uint64_t offered = 0;
    for (int message = 0;
         at < data.size() && !failed && std::chrono::steady_clock::now() < deadline; ++message) {
      // Every 8th message waits (bounded) for a fresh window, so single copy surely happens
      // (unless the receiver withdraws that window at random first); the others race freely.
      if (message % 8 == 7) {  // not the first: the receiver offers once it saw big packets
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        while (p.server->Stats().windows_offered == offered &&
               std::chrono::steady_clock::now() < until) {
          std::this_thread::yield();
        }
        offered = p.server->Stats().windows_offered;
      }
      const size_t n = std::min<size_t>(data.size() - at, 1 + rng() % 100000);
      iovec iov{const_cast<uint8_t*>(data.data() + at), n};
      Result<size_t> r = p.client->Send(&iov, 1, nullptr, kMin);
      if (r.ok()) {
        at += r.value();
      } else if (!r.status().would_block()) {
        failed = true;
      } else {
        std::this_thread::yield();
      }
    }
  });
  std::mt19937 rng(2);
  std::vector<uint8_t> got;
  got.reserve(data.size());
  std::vector<uint8_t> buf(200000);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (got.size() < data.size() && !failed && std::chrono::steady_clock::now() < deadline) {
    iovec iov{buf.data(), 1 + rng() % buf.size()};
    Result<size_t> r = p.server->Recv(&iov, 1, false, kMin);
    if (!r.ok() && r.status().would_block() && rng() % 4 == 0) {
      r = p.server->WithdrawWindow(buf.data());
      if (r.ok() && r.value() == 0) r = Status(EAGAIN, "");
    }
    if (r.ok()) {
      ASSERT_TRUE(std::equal(buf.begin(), buf.begin() + r.value(), data.begin() + got.size()))
          << "at " << got.size();
      got.insert(got.end(), buf.begin(), buf.begin() + r.value());
      p.server->WithdrawWindow(buf.data());
    } else if (!r.status().would_block()) {
      failed = true;
    } else {
      std::this_thread::yield();
    }
  }
  p.server->WithdrawWindow(buf.data());
  sender.join();
  EXPECT_FALSE(failed);
  EXPECT_EQ(got.size(), data.size());
  EXPECT_GT(p.server->Stats().single_copy_bytes_received, 0u) << "single copy never happened";
}

// ---- hostile peer ------------------------------------------------------------------------------
// The client is the victim (the receiver that offers windows); the server posts raw packets.

class proto_stream_single_copy_hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OpenPair(SharedLoopback(), MtuOptions(kMtu), &pair_));
    ASSERT_NO_FATAL_FAILURE(
        RingTransfer(pair_, *pair_.server, *pair_.client, Pattern(3 * kMtu, 30)));
    ASSERT_TRUE(pair_.server->Progress().ok());
    ASSERT_TRUE(pair_.client->Progress().ok());
  }
  Stream& victim() { return *pair_.client; }
  Stream& attacker() { return *pair_.server; }
  // The attacker's next packet, numbered where its stream left off.
  Status Raw(PacketType type, const void* body, uint32_t length) {
    fabric::SendWork w;
    w.id = 0x7777;
    w.imm = EncodeImm(
        Header{type, 0, static_cast<uint16_t>(attacker().Stats().packets_sent + raw_sent_++)});
    w.num_segments = 1;
    w.segments[0] = fabric::Segment{body, length, 0};
    return attacker().endpoint().PostSend(w);
  }
  Status Put(uint32_t generation, uint32_t length) {
    PutBody b;
    b.generation = generation;
    b.length = length;
    std::byte bytes[PutBody::kSize];
    EncodePut(b, bytes);
    return Raw(PacketType::kPut, bytes, sizeof bytes);
  }
  int VictimError() {
    PumpUntil(
        pair_, [&] { return victim().GetReadiness().error != 0; }, 1000);
    return victim().GetReadiness().error;
  }
  StreamPair pair_;
  uint32_t raw_sent_ = 0;
};

TEST_F(proto_stream_single_copy_hostile, PutWithoutAWindow) {
  ASSERT_TRUE(Put(1, 100).ok());
  EXPECT_EQ(VictimError(), EPROTO);
}

TEST_F(proto_stream_single_copy_hostile, PutLargerThanTheWindow) {
  std::vector<uint8_t> buf(20000);
  ASSERT_EQ(Recv(victim(), buf).status().code(), EAGAIN);
  ASSERT_TRUE(Put(1, 20001).ok());
  EXPECT_EQ(VictimError(), EPROTO);
  victim().WithdrawWindow(buf.data());
}

TEST_F(proto_stream_single_copy_hostile, PutForAnotherGeneration) {
  std::vector<uint8_t> buf(20000);
  ASSERT_EQ(Recv(victim(), buf).status().code(), EAGAIN);
  ASSERT_TRUE(Put(7, 100).ok());
  EXPECT_EQ(VictimError(), EPROTO);
  victim().WithdrawWindow(buf.data());
}

// The PUT claims bytes, but nobody ever wrote (claimed) the window: the victim must not return
// its buffer's stale contents as stream data.
TEST_F(proto_stream_single_copy_hostile, PutForAWindowNobodyWrote) {
  std::vector<uint8_t> buf(20000);
  ASSERT_EQ(Recv(victim(), buf).status().code(), EAGAIN);
  ASSERT_TRUE(Put(1, 100).ok());
  Result<size_t> r = Recv(victim(), buf);
  EXPECT_EQ(r.status().code(), EPROTO);
  EXPECT_EQ(victim().GetReadiness().error, EPROTO);
}

TEST_F(proto_stream_single_copy_hostile, PutAfterDataThatOvertookIt) {
  std::vector<uint8_t> buf(20000);
  ASSERT_EQ(Recv(victim(), buf).status().code(), EAGAIN);
  ASSERT_TRUE(Raw(PacketType::kData, "abc", 3).ok());
  ASSERT_TRUE(Put(1, 100).ok());
  EXPECT_EQ(VictimError(), EPROTO);
  victim().WithdrawWindow(buf.data());
}

TEST_F(proto_stream_single_copy_hostile, MalformedBodies) {
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which);
    StreamPair p;
    ASSERT_NO_FATAL_FAILURE(OpenPair(SharedLoopback(), MtuOptions(kMtu), &p));
    std::byte junk[AdvertBody::kSize] = {};
    fabric::SendWork w;
    w.imm = EncodeImm(Header{which == 2 ? PacketType::kPut : PacketType::kAdvert, 0,
                             static_cast<uint16_t>(p.server->Stats().packets_sent)});
    w.num_segments = 1;
    w.segments[0] = fabric::Segment{junk, which == 0 ? 31u : 32u, 0};  // short; bad magic
    ASSERT_TRUE(p.server->endpoint().PostSend(w).ok());
    PumpUntil(
        p, [&] { return p.client->GetReadiness().error != 0; }, 1000);
    EXPECT_EQ(p.client->GetReadiness().error, EPROTO);
  }
}

}  // namespace
}  // namespace san::proto
