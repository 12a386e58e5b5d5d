// proto::Stream under faults (loopback FaultPlan: loss, failed posts, breaks, delays) and against a
// hostile peer that posts raw packets on its fabric endpoint. The rule under test: a stream never
// delivers bytes that are not the peer's stream, in order; a violation ends the connection with an
// error on both sides; nothing crashes or reads out of bounds (run under the asan preset).
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "sanlib/fabric/registry.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/wire.h"
#include "stream_test_util.h"

namespace san::proto {
namespace {

using testing::DrainAll;
using testing::FaultPlan;
using testing::Loopback;
using testing::LoopbackProvider;
using testing::MakePair;
using testing::MtuOptions;
using testing::OpenLoopbackPair;
using testing::OpenPair;
using testing::PairOptions;
using testing::Pattern;
using testing::PumpUntil;
using testing::ReadExactly;
using testing::RecvBytes;
using testing::SendBytes;
using testing::SharedLoopback;
using testing::StreamPair;
using testing::Transfer;

constexpr uint32_t kMtu = 4096;

// Pumps `victim` until it reports a connection error; returns it (0 if none came).
int ErrorOf(StreamPair& pair, Stream& victim) {
  PumpUntil(
      pair, [&] { return victim.GetReadiness().error != 0; }, 1000);
  return victim.GetReadiness().error;
}

bool IsPrefix(const std::vector<uint8_t>& got, const std::vector<uint8_t>& data) {
  return got.size() <= data.size() && std::equal(got.begin(), got.end(), data.begin());
}

// ---- loss, failed posts, breaks ----------------------------------------------------------------

TEST(proto_stream_fault, DroppedPacketIsASequenceGapNotCorruption) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(MtuOptions(kMtu), &pair));
  FaultPlan plan;
  plan.drop_send = 2;  // counted from now: the client's second packet vanishes
  Loopback(*pair.client).set_fault_plan(plan);
  std::vector<uint8_t> data = Pattern(5 * 100, 21);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(SendBytes(*pair.client, data.data() + 100 * i, 100).value(), 100u) << i;
  }
  testing::Drained d = DrainAll(pair, *pair.server);
  EXPECT_EQ(d.error, EPROTO);  // the receiver saw packet 3 where 2 was due
  EXPECT_FALSE(d.eof);
  ASSERT_EQ(d.bytes.size(), 100u);  // packet 1 only: nothing after the gap
  EXPECT_TRUE(IsPrefix(d.bytes, data));
  EXPECT_EQ(ErrorOf(pair, *pair.client), ECONNRESET);
  EXPECT_TRUE(pair.client->endpoint().broken());
}

TEST(proto_stream_fault, DroppedAckIsDetectedByTheNextPacket) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(MtuOptions(kMtu), &pair));
  FaultPlan plan;
  plan.drop_send = 1;  // the server's first packet from now on: its explicit ACK
  Loopback(*pair.server).set_fault_plan(plan);
  std::vector<uint8_t> data = Pattern(31 * kMtu, 22);
  ASSERT_EQ(SendBytes(*pair.client, data.data(), data.size()).value(), data.size());
  ASSERT_TRUE(ReadExactly(pair, *pair.server, data.size()) == data);
  EXPECT_EQ(pair.server->Stats().explicit_acks_sent, 1u);
  // The client never got those credits; the server's next packet reveals the gap.
  EXPECT_EQ(SendBytes(*pair.client, "x", 1).status().code(), EAGAIN);
  ASSERT_EQ(SendBytes(*pair.server, "y", 1).value(), 1u);
  EXPECT_EQ(ErrorOf(pair, *pair.client), EPROTO);
  EXPECT_EQ(ErrorOf(pair, *pair.server), ECONNRESET);
}

TEST(proto_stream_fault, FailedPostFailsTheConnectionCleanly) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(MtuOptions(kMtu), &pair));
  FaultPlan plan;
  plan.fail_send = 3;
  plan.fail_error = EIO;
  Loopback(*pair.client).set_fault_plan(plan);
  std::vector<uint8_t> data = Pattern(5 * kMtu, 23);
  // Two packets go; the third post fails: the send reports what was taken, then the error.
  Result<size_t> r = SendBytes(*pair.client, data.data(), data.size());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), 2u * kMtu);
  EXPECT_EQ(SendBytes(*pair.client, data.data(), data.size()).status().code(), EIO);
  EXPECT_EQ(pair.client->GetReadiness().error, EIO);
  testing::Drained d = DrainAll(pair, *pair.server);
  EXPECT_EQ(d.error, ECONNRESET);
  EXPECT_EQ(d.bytes.size(), 2u * kMtu);
  EXPECT_TRUE(IsPrefix(d.bytes, data));
}

TEST(proto_stream_fault, FailedFirstPostTakesNothing) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(MtuOptions(kMtu), &pair));
  FaultPlan plan;
  plan.fail_send = 1;
  plan.fail_error = ENOBUFS;
  Loopback(*pair.client).set_fault_plan(plan);
  EXPECT_EQ(SendBytes(*pair.client, "abc", 3).status().code(), ENOBUFS);
  testing::Drained d = DrainAll(pair, *pair.server);
  EXPECT_EQ(d.error, ECONNRESET);
  EXPECT_TRUE(d.bytes.empty());
}

TEST(proto_stream_fault, PostThatWouldBlockIsRetried) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(MtuOptions(kMtu), &pair));
  FaultPlan plan;
  plan.fail_send = 2;
  plan.fail_error = EAGAIN;  // a full send queue: reap and post again
  Loopback(*pair.client).set_fault_plan(plan);
  std::vector<uint8_t> data = Pattern(100000, 24);
  EXPECT_TRUE(Transfer(*pair.client, *pair.server, data) == data);
  EXPECT_EQ(pair.client->GetReadiness().error, 0);
  EXPECT_EQ(pair.server->GetReadiness().error, 0);
}

TEST(proto_stream_fault, BrokenLinkResetsBothSides) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(MtuOptions(kMtu), &pair));
  FaultPlan plan;
  plan.break_at_send = 2;
  Loopback(*pair.client).set_fault_plan(plan);
  std::vector<uint8_t> data = Pattern(3 * kMtu, 25);
  Result<size_t> r = SendBytes(*pair.client, data.data(), data.size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), size_t{kMtu});
  EXPECT_EQ(SendBytes(*pair.client, data.data(), 1).status().code(), ECONNRESET);
  testing::Drained d = DrainAll(pair, *pair.server);
  EXPECT_EQ(d.error, ECONNRESET);
  EXPECT_TRUE(IsPrefix(d.bytes, data));
  EXPECT_LE(d.bytes.size(), size_t{kMtu});
  EXPECT_EQ(pair.client->GetReadiness().error, ECONNRESET);
  EXPECT_EQ(pair.server->GetReadiness().error, ECONNRESET);
}

TEST(proto_stream_fault, PeerEndpointDestroyedIsAReset) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(MtuOptions(kMtu), &pair));
  ASSERT_TRUE(SendBytes(*pair.client, "abc", 3).ok());
  pair.server.reset();  // the peer process vanished
  EXPECT_EQ(pair.client->Progress().code(), ECONNRESET);
  EXPECT_EQ(SendBytes(*pair.client, "d", 1).status().code(), ECONNRESET);
}

// Delays keep order and lose nothing: the stream must not mistake a late packet for a lost one.
void TransferUnderDelay(const FaultPlan& plan) {
  LoopbackProvider provider(plan);
  for (bool nodelay : {true, false}) {
    SCOPED_TRACE(nodelay ? "nodelay" : "combining");
    StreamPair pair;
    ASSERT_NO_FATAL_FAILURE(OpenPair(&provider, MtuOptions(kMtu, nodelay), &pair));
    std::vector<uint8_t> a = Pattern(300000, 26), b = Pattern(200000, 27);
    EXPECT_TRUE(Transfer(*pair.client, *pair.server, a, 65536, 10000000) == a);
    EXPECT_TRUE(Transfer(*pair.server, *pair.client, b, 3000, 10000000) == b);
    // Small messages both ways, interleaved.
    for (int i = 0; i < 50; ++i) {
      std::vector<uint8_t> m = Pattern(1 + i * 37, 100 + i);
      ASSERT_TRUE(Transfer(i % 2 ? *pair.client : *pair.server, i % 2 ? *pair.server : *pair.client,
                           m, 65536, 10000000) == m)
          << i;
    }
    ASSERT_TRUE(pair.client->ShutdownWrite().ok());
    ASSERT_TRUE(pair.server->ShutdownWrite().ok());
    ASSERT_TRUE(PumpUntil(
        pair, [&] { return pair.client->Finished() && pair.server->Finished(); }, 10000000));
    EXPECT_EQ(pair.client->GetReadiness().error, 0);
    EXPECT_EQ(pair.server->GetReadiness().error, 0);
  }
}

TEST(proto_stream_fault, DelayedByPollsArrivesWholeAndInOrder) {
  FaultPlan plan;
  plan.delay_polls = 3;
  TransferUnderDelay(plan);
}

TEST(proto_stream_fault, DelayedByTimeArrivesWholeAndInOrder) {
  FaultPlan plan;
  plan.delay_us = 100;
  TransferUnderDelay(plan);
}

// ---- hostile peer ------------------------------------------------------------------------------
// The server's stream plays the attacker: it stays honest until the test posts raw packets on its
// fabric endpoint. The client is the victim.

class RawSender {
 public:
  // Continues the attacker's packet numbering where its Stream left it.
  explicit RawSender(Stream& s) : s_(s), seq_(static_cast<uint16_t>(s.Stats().packets_sent)) {}

  Status Imm(uint32_t imm, const void* body = nullptr, uint32_t length = 0) {
    fabric::SendWork w;
    w.id = 0x7777;
    w.imm = imm;
    if (length) {
      w.num_segments = 1;
      w.segments[0] = fabric::Segment{body, length, 0};
    }
    return s_.endpoint().PostSend(w);
  }
  Status Packet(PacketType type, uint8_t credits = 0, const void* body = nullptr,
                uint32_t length = 0) {
    return Imm(EncodeImm(Header{type, credits, seq_++}), body, length);
  }
  uint16_t next_seq() const { return seq_; }
  void Skip() { ++seq_; }  // a packet sent with Imm() used the next number

 private:
  Stream& s_;
  uint16_t seq_;
};

uint32_t RawImm(uint32_t type, uint32_t version, uint32_t seq) {
  return (type << 28) | (version << 16) | seq;
}

class proto_stream_hostile : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(MtuOptions(kMtu), &pair_)); }
  Stream& victim() { return *pair_.client; }
  Stream& attacker() { return *pair_.server; }
  // The victim ends the connection with `code`, the attacker sees the reset, and neither delivers
  // anything afterwards.
  void ExpectVictimFails(int code) {
    EXPECT_EQ(ErrorOf(pair_, victim()), code);
    EXPECT_EQ(ErrorOf(pair_, attacker()), ECONNRESET);
    EXPECT_TRUE(victim().endpoint().broken());
    EXPECT_NE(SendBytes(victim(), "z", 1).status().code(), 0);
  }
  StreamPair pair_;
};

TEST_F(proto_stream_hostile, InvalidPacketType) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Imm(RawImm(0, kWireVersion, raw.next_seq())).ok());
  ExpectVictimFails(EPROTO);
}

TEST_F(proto_stream_hostile, UnknownPacketType) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Imm(RawImm(9, kWireVersion, raw.next_seq()), "data", 4).ok());
  ExpectVictimFails(EPROTO);
}

TEST_F(proto_stream_hostile, WrongVersion) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Imm(RawImm(1, kWireVersion + 1, raw.next_seq()), "data", 4).ok());
  ExpectVictimFails(EPROTO);
}

TEST_F(proto_stream_hostile, SkippedSequenceNumber) {
  RawSender raw(attacker());
  ASSERT_TRUE(
      raw.Imm(EncodeImm(Header{PacketType::kData, 0, uint16_t(raw.next_seq() + 1)}), "data", 4)
          .ok());
  ExpectVictimFails(EPROTO);
  EXPECT_EQ(victim().Available(), 0u);
}

TEST_F(proto_stream_hostile, ReplayedSequenceNumber) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kData, 0, "one", 3).ok());
  ASSERT_TRUE(
      raw.Imm(EncodeImm(Header{PacketType::kData, 0, uint16_t(raw.next_seq() - 1)}), "two", 3)
          .ok());
  testing::Drained d = DrainAll(pair_, victim());
  EXPECT_EQ(d.error, EPROTO);
  EXPECT_EQ(std::string(d.bytes.begin(), d.bytes.end()), "one");
}

TEST_F(proto_stream_hostile, CreditsBeyondTheWindow) {
  // After the WAKEUP exchange the victim holds 31 of 32 credits: exactly one may come back.
  ASSERT_EQ(victim().Stats().credits, 31u);
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kAck, 1).ok());
  ASSERT_TRUE(victim().Progress().ok());
  EXPECT_EQ(victim().Stats().credits, 32u);
  ASSERT_TRUE(raw.Packet(PacketType::kAck, 1).ok());
  ExpectVictimFails(EPROTO);
}

TEST_F(proto_stream_hostile, HugeCreditOnData) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kData, 255, "x", 1).ok());
  ExpectVictimFails(EPROTO);
  EXPECT_EQ(victim().Available(), 0u);
}

TEST_F(proto_stream_hostile, AckWithPayload) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kAck, 0, "junk", 4).ok());
  ExpectVictimFails(EPROTO);
}

// Packets that landed behind the violating one (reaped in the same batch) are not delivered.
TEST_F(proto_stream_hostile, NothingIsDeliveredAfterTheViolation) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kData, 0, "fine", 4).ok());
  ASSERT_TRUE(raw.Packet(PacketType::kAck, 0, "junk", 4).ok());  // in sequence, but malformed
  ASSERT_TRUE(raw.Packet(PacketType::kData, 0, "evil", 4).ok());
  testing::Drained d = DrainAll(pair_, victim());
  EXPECT_EQ(d.error, EPROTO);
  EXPECT_EQ(std::string(d.bytes.begin(), d.bytes.end()), "fine");
}

TEST_F(proto_stream_hostile, FinWithPayload) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kFin, 0, "junk", 4).ok());
  ExpectVictimFails(EPROTO);
}

TEST_F(proto_stream_hostile, EmptyData) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kData).ok());
  ExpectVictimFails(EPROTO);
}

TEST_F(proto_stream_hostile, DataAfterFin) {
  ASSERT_EQ(SendBytes(attacker(), "good", 4).value(), 4u);
  ASSERT_TRUE(attacker().ShutdownWrite().ok());
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kData, 0, "evil", 4).ok());
  EXPECT_EQ(ErrorOf(pair_, victim()), EPROTO);
  // What came before the FIN is the whole stream; then EOF. "evil" is never delivered.
  testing::Drained d = DrainAll(pair_, victim());
  EXPECT_EQ(std::string(d.bytes.begin(), d.bytes.end()), "good");
  EXPECT_TRUE(d.eof);
  EXPECT_EQ(victim().Progress().code(), EPROTO);
}

TEST_F(proto_stream_hostile, DuplicateFin) {
  ASSERT_TRUE(attacker().ShutdownWrite().ok());
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kFin).ok());
  ExpectVictimFails(EPROTO);
}

TEST_F(proto_stream_hostile, UnexpectedFinAck) {
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kFinAck).ok());
  ExpectVictimFails(EPROTO);
}

TEST_F(proto_stream_hostile, SecondWakeup) {
  WakeupBody body;
  body.window = 32;
  body.ack_reserve = 3;
  body.buffer_size = kMtu;
  std::byte bytes[WakeupBody::kSize];
  EncodeWakeup(body, bytes);
  RawSender raw(attacker());
  ASSERT_TRUE(raw.Packet(PacketType::kWakeup, 0, bytes, sizeof(bytes)).ok());
  ExpectVictimFails(EPROTO);
}

TEST_F(proto_stream_hostile, WindowOverrun) {
  // 33 credit-consuming packets where the window is 32 (the victim does not read in between).
  RawSender raw(attacker());
  for (int i = 0; i < 33; ++i) {
    uint8_t byte = static_cast<uint8_t>('a' + i % 26);
    ASSERT_TRUE(raw.Packet(PacketType::kData, 0, &byte, 1).ok()) << i;
  }
  testing::Drained d = DrainAll(pair_, victim());
  EXPECT_EQ(d.error, EPROTO);
  EXPECT_EQ(d.bytes.size(), 32u);  // the overrunning packet is not delivered
  EXPECT_EQ(ErrorOf(pair_, attacker()), ECONNRESET);
}

TEST_F(proto_stream_hostile, MessageLargerThanTheReceiveBuffer) {
  // The provider refuses to land it (no truncation) and breaks the connection.
  std::vector<uint8_t> big(kMtu + 1, 0xee);
  RawSender raw(attacker());
  EXPECT_FALSE(raw.Packet(PacketType::kData, 0, big.data(), kMtu + 1).ok());
  EXPECT_EQ(ErrorOf(pair_, victim()), ECONNRESET);
  EXPECT_EQ(victim().Available(), 0u);
}

// Before the windows open: the WAKEUP itself is the hostile input.
class proto_stream_hostile_wakeup : public ::testing::Test {
 protected:
  void SetUp() override {
    PairOptions opt = MtuOptions(kMtu);
    opt.start = false;
    ASSERT_NO_FATAL_FAILURE(MakePair(SharedLoopback(), opt, &pair_));
    ASSERT_TRUE(pair_.client->Start().ok());
  }
  // Sends `body` as the attacker's first packet; returns the victim's resulting error.
  int Victim(PacketType type, uint8_t credits, const void* body, uint32_t length) {
    RawSender raw(*pair_.server);
    EXPECT_TRUE(raw.Packet(type, credits, body, length).ok());
    PumpUntil(
        pair_, [&] { return pair_.client->GetReadiness().error != 0; }, 1000);
    return pair_.client->GetReadiness().error;
  }
  static std::vector<std::byte> Body(uint16_t window, uint32_t buffer_size, uint32_t flags = 0) {
    WakeupBody b;
    b.window = window;
    b.ack_reserve = 3;
    b.buffer_size = buffer_size;
    b.flags = flags;
    std::vector<std::byte> out(WakeupBody::kSize);
    EncodeWakeup(b, out.data());
    return out;
  }
  StreamPair pair_;
};

TEST_F(proto_stream_hostile_wakeup, HonestWakeupIsAccepted) {
  auto b = Body(32, kMtu);
  EXPECT_EQ(Victim(PacketType::kWakeup, 1, b.data(), b.size()), 0);  // returns our WAKEUP's credit
  EXPECT_EQ(pair_.client->Stats().credits, 32u);
}

TEST_F(proto_stream_hostile_wakeup, DataBeforeWakeup) {
  EXPECT_EQ(Victim(PacketType::kData, 0, "early", 5), EPROTO);
}

TEST_F(proto_stream_hostile_wakeup, BadMagic) {
  auto b = Body(32, kMtu);
  b[0] = std::byte{0};
  EXPECT_EQ(Victim(PacketType::kWakeup, 0, b.data(), b.size()), EPROTO);
}

TEST_F(proto_stream_hostile_wakeup, ShortBody) {
  auto b = Body(32, kMtu);
  EXPECT_EQ(Victim(PacketType::kWakeup, 0, b.data(), b.size() - 1), EPROTO);
}

TEST_F(proto_stream_hostile_wakeup, ZeroWindow) {
  auto b = Body(0, kMtu);
  EXPECT_EQ(Victim(PacketType::kWakeup, 0, b.data(), b.size()), EPROTO);
}

TEST_F(proto_stream_hostile_wakeup, TinyBuffers) {
  auto b = Body(32, 16);
  EXPECT_EQ(Victim(PacketType::kWakeup, 0, b.data(), b.size()), EPROTO);
}

TEST_F(proto_stream_hostile_wakeup, ReservedFlags) {
  auto b = Body(32, kMtu, 8);
  EXPECT_EQ(Victim(PacketType::kWakeup, 0, b.data(), b.size()), EPROTO);
}

// kWakeupNamesSource without its 8 bytes, or naming port 0.
TEST_F(proto_stream_hostile_wakeup, NamedSourceMissingOrZero) {
  auto b = Body(32, kMtu);
  b[12] = std::byte{4};  // the flag, on a 16-byte body
  EXPECT_EQ(Victim(PacketType::kWakeup, 0, b.data(), b.size()), EPROTO);
}

TEST_F(proto_stream_hostile_wakeup, NamedSourcePortZero) {
  auto b = Body(32, kMtu);
  b[12] = std::byte{4};
  b.resize(24);  // port 0 and zero padding
  EXPECT_EQ(Victim(PacketType::kWakeup, 0, b.data(), b.size()), EPROTO);
}

TEST_F(proto_stream_hostile_wakeup, NamedSourceIsAcceptedAndReported) {
  auto b = Body(32, kMtu);
  b[12] = std::byte{4};
  b.resize(24);
  b[16] = std::byte{0x39};  // port 12345, little-endian
  b[17] = std::byte{0x30};
  EXPECT_EQ(Victim(PacketType::kWakeup, 1, b.data(), b.size()), 0);
  EXPECT_EQ(pair_.client->PeerSourcePort(), 12345);
}

TEST_F(proto_stream_hostile_wakeup, CreditsItCannotOwe) {
  auto b = Body(32, kMtu);  // our one WAKEUP is all it can acknowledge
  EXPECT_EQ(Victim(PacketType::kWakeup, 2, b.data(), b.size()), EPROTO);
}

// Random packets from the attacker after an honest start: the victim either carries on or fails
// with EPROTO/ECONNRESET; it never crashes, and whatever it delivers is a prefix of the bodies
// that were sent as in-sequence DATA.
TEST(proto_stream_hostile_random, RandomPacketsNeverCrashTheVictim) {
  std::mt19937 rng(4242);
  int failed = 0;
  for (int round = 0; round < 60; ++round) {
    SCOPED_TRACE(round);
    StreamPair pair;
    ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(MtuOptions(kMtu), &pair));
    RawSender raw(*pair.server);
    std::vector<uint8_t> sent_as_data;
    const int packets = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < packets; ++i) {
      std::vector<uint8_t> body(rng() % 4 ? rng() % 64 : rng() % (kMtu + 2));
      for (auto& b : body) b = static_cast<uint8_t>(rng());
      uint32_t imm;
      switch (rng() % 3) {
        case 0:  // anything at all
          imm = static_cast<uint32_t>(rng());
          break;
        case 1:  // a well-formed header of any type, mostly without credits
          imm = EncodeImm(Header{static_cast<PacketType>(1 + rng() % 5),
                                 static_cast<uint8_t>(rng() % 3 ? 0 : rng() % 4), raw.next_seq()});
          break;
        default:  // honest-looking DATA
          imm = EncodeImm(Header{PacketType::kData, 0, raw.next_seq()});
          break;
      }
      Result<Header> h = DecodeImm(imm);
      const bool in_sequence = h.ok() && h->seq == raw.next_seq();
      if (!raw.Imm(imm, body.data(), static_cast<uint32_t>(body.size())).ok()) break;
      if (in_sequence) {
        raw.Skip();
        if (h->type == PacketType::kData) {
          sent_as_data.insert(sent_as_data.end(), body.begin(), body.end());
        }
      }
    }
    testing::Drained d = DrainAll(pair, *pair.client, 2000);
    if (d.error != 0) {
      ++failed;
      EXPECT_TRUE(d.error == EPROTO || d.error == ECONNRESET) << d.error;
    }
    EXPECT_TRUE(IsPrefix(d.bytes, sent_as_data));
  }
  EXPECT_GT(failed, 10);  // the generator does produce violations
}

}  // namespace
}  // namespace san::proto
