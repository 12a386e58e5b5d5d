// proto::Stream over the loopback provider, driven from one thread: creation, the WAKEUP exchange,
// byte-stream integrity, sequence wrap, MSG_PEEK, half-close, the close handshake and abort. The
// window, ACKs and combining are in stream_flow_test.cc, faults and hostile peers in
// stream_fault_test.cc, threads in stream_thread_test.cc.
#include "sanlib/proto/stream.h"

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "stream_test_util.h"

namespace san::proto {
namespace {

using testing::DrainAll;
using testing::Fnv1a;
using testing::MakePair;
using testing::OpenLoopbackPair;
using testing::PairOptions;
using testing::Pattern;
using testing::PumpUntil;
using testing::ReadExactly;
using testing::RecvBytes;
using testing::SendBytes;
using testing::SendStr;
using testing::SharedLoopback;
using testing::SmallMtu;
using testing::Str;
using testing::StreamPair;
using testing::Symmetric;
using testing::Transfer;
using testing::WindowsOpen;

// ---- creation and WAKEUP -----------------------------------------------------------------------

TEST(proto_stream, CreateRejectsBadParameters) {
  fabric::Provider* provider = SharedLoopback();
  const StreamParams good = SmallMtu(256);
  auto try_create = [&](StreamParams p) {
    auto ep = provider->CreateEndpoint(Stream::EndpointAttrFor(good));
    EXPECT_TRUE(ep.ok());
    return Stream::Create(std::move(ep).value(), provider->capabilities(), p).status().code();
  };
  StreamParams p = good;
  p.ack_threshold = 0;
  EXPECT_EQ(try_create(p), EINVAL) << "t = 0";
  p = good;
  p.ack_threshold = p.window;
  EXPECT_EQ(try_create(p), EINVAL) << "t = w (SOVIA: t < w)";
  p = good;
  p.window = 256;
  p.ack_threshold = 128;
  EXPECT_EQ(try_create(p), EINVAL) << "w beyond the 8-bit credit field";
  p = good;
  p.mtu = 63;
  EXPECT_EQ(try_create(p), EINVAL) << "mtu below 64";
  p = good;
  p.mtu = provider->max_mtu() + 1;
  EXPECT_EQ(try_create(p), EINVAL) << "mtu beyond the provider's";
  // The largest P the state block holds: 255 + 255 + 1.
  p = good;
  p.window = 255;
  p.ack_threshold = 1;
  auto ep = provider->CreateEndpoint(Stream::EndpointAttrFor(p));
  ASSERT_TRUE(ep.ok());
  EXPECT_TRUE(Stream::Create(std::move(ep).value(), provider->capabilities(), p).ok());
}

TEST(proto_stream, EndpointAttrForSizesTheReceiveQueue) {
  StreamParams p;
  EXPECT_EQ(p.receive_depth(), 32u + 2u + 1u + 1u);  // SOVIA's P = w + w/t + 1, + 1 for MOVE
  fabric::EndpointAttr a = Stream::EndpointAttrFor(p);
  EXPECT_EQ(a.recv_depth, p.receive_depth());
  EXPECT_GE(a.buffer_bytes, size_t{p.receive_depth()} * p.mtu);
}

TEST(proto_stream, WakeupExchangeOpensTheWindow) {
  PairOptions opt = Symmetric(SmallMtu());
  opt.server_params.window = 16;
  opt.server_params.ack_threshold = 4;
  opt.start = false;
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(MakePair(SharedLoopback(), opt, &pair));
  Stream& c = *pair.client;
  Stream& s = *pair.server;

  // Before the peer's WAKEUP only our own WAKEUP may be sent: data would block.
  EXPECT_EQ(c.Stats().window, 1u);
  EXPECT_EQ(SendStr(c, "x").status().code(), EAGAIN);
  EXPECT_FALSE(c.GetReadiness().writable);

  ASSERT_TRUE(c.Start().ok());
  ASSERT_TRUE(s.Start().ok());
  ASSERT_TRUE(c.Start().ok());  // idempotent
  EXPECT_EQ(c.Stats().packets_sent, 1u);
  ASSERT_TRUE(WindowsOpen(pair));
  // Each side's window is what the *peer* granted; each side's WAKEUP used one credit, which the
  // peer reports back with its next packet.
  StreamStats cs = c.Stats(), ss = s.Stats();
  EXPECT_EQ(cs.window, 16u);
  EXPECT_EQ(cs.credits, 15u);
  EXPECT_EQ(ss.window, 32u);
  EXPECT_EQ(ss.credits, 31u);
  EXPECT_EQ(cs.packets_received, 1u);
  EXPECT_EQ(ss.packets_received, 1u);
  EXPECT_EQ(cs.mtu, 4096u);
  EXPECT_TRUE(c.GetReadiness().writable);
  EXPECT_EQ(cs.phase, ClosePhase::kOpen);

  // One packet each way gives every credit back.
  ASSERT_TRUE(SendStr(c, "ping").ok());
  ASSERT_TRUE(c.Flush().ok());
  EXPECT_EQ(Str(ReadExactly(pair, s, 4)), "ping");
  ASSERT_TRUE(SendStr(s, "pong").ok());
  ASSERT_TRUE(s.Flush().ok());
  EXPECT_EQ(Str(ReadExactly(pair, c, 4)), "pong");
  EXPECT_EQ(c.Stats().credits, 16u);
  s.Progress();
  EXPECT_EQ(s.Stats().credits, 31u);  // the pong is not yet acknowledged
}

// The peer handled our WAKEUP before sending its own, so its WAKEUP already carries our WAKEUP's
// credit. That credit must survive the window opening (it used to be overwritten by Open, leaving
// the window one short for the life of the connection and never idle).
TEST(proto_stream, WakeupCarryingACreditKeepsIt) {
  PairOptions opt = Symmetric(SmallMtu());
  opt.start = false;
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(MakePair(SharedLoopback(), opt, &pair));
  ASSERT_TRUE(pair.client->Start().ok());
  ASSERT_TRUE(pair.server->Progress().ok());  // reaps the client's WAKEUP, frees its buffer
  EXPECT_EQ(pair.server->Stats().credits, 32u);
  ASSERT_TRUE(pair.server->Start().ok());  // its WAKEUP piggybacks that freed buffer
  ASSERT_TRUE(pair.client->Progress().ok());
  EXPECT_EQ(pair.client->Stats().window, 32u);
  EXPECT_EQ(pair.client->Stats().credits, 32u);
  // Nothing of the client's is outstanding, so Nagle sends a small message at once.
  const uint64_t before = pair.client->Stats().packets_sent;
  bool buffered = true;
  ASSERT_TRUE(SendStr(*pair.client, "now", &buffered).ok());
  EXPECT_FALSE(buffered);
  EXPECT_EQ(pair.client->Stats().packets_sent, before + 1);
  EXPECT_EQ(Str(ReadExactly(pair, *pair.server, 3)), "now");
}

// ---- byte stream integrity ---------------------------------------------------------------------

// Parameter: whether the provider sends from any memory (no staging copy on the send side) or
// only from registered memory (every packet staged).
class proto_stream_integrity : public ::testing::TestWithParam<bool> {};

TEST_P(proto_stream_integrity, ManySizesBothDirections) {
  PairOptions opt = Symmetric(SmallMtu(4096));
  if (!GetParam()) opt.caps = fabric::kCapReliable | fabric::kCapWaitable;
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(opt, &pair));
  const size_t sizes[] = {1,    2,    63,   64,   1000, 2047,          2048,      2049,
                          4095, 4096, 4097, 8192, 8193, 3 * 4096 + 17, 10 * 4096, 200001};
  const size_t chunks[] = {7, 1000, 4096, 65536};
  uint32_t seed = 1;
  uint64_t total = 0;
  for (size_t size : sizes) {
    for (size_t chunk : chunks) {
      for (int dir = 0; dir < 2; ++dir) {
        SCOPED_TRACE(::testing::Message()
                     << "size " << size << " chunk " << chunk << " dir " << dir);
        Stream& from = dir ? *pair.server : *pair.client;
        Stream& to = dir ? *pair.client : *pair.server;
        std::vector<uint8_t> data = Pattern(size, seed++);
        std::vector<uint8_t> got = Transfer(from, to, data, chunk, 1000000);
        ASSERT_EQ(got.size(), data.size());
        EXPECT_EQ(Fnv1a(got.data(), got.size()), Fnv1a(data.data(), data.size()));
        ASSERT_TRUE(got == data);
        if (dir == 0) total += size;
      }
    }
  }
  EXPECT_EQ(pair.client->Stats().bytes_sent, total);
  EXPECT_EQ(pair.server->Stats().bytes_received, total);
  EXPECT_EQ(pair.client->Available(), 0u);
  EXPECT_EQ(pair.server->Available(), 0u);
}

TEST_P(proto_stream_integrity, IovecsOfManyPieces) {
  PairOptions opt = Symmetric(SmallMtu(4096));
  if (!GetParam()) opt.caps = fabric::kCapReliable | fabric::kCapWaitable;
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(opt, &pair));
  // More pieces than a provider send carries (4), pieces straddling packet boundaries, and
  // pieces of every size class; used for both direct and combined sends.
  const std::vector<size_t> pieces = {1, 7, 100, 3000, 5, 4096, 4097, 1, 2, 3, 600, 9000, 13};
  for (size_t size : {size_t{300}, size_t{2000}, size_t{30000}, size_t{150000}}) {
    SCOPED_TRACE(size);
    std::vector<uint8_t> data = Pattern(size, static_cast<uint32_t>(size));
    std::vector<uint8_t> got = Transfer(*pair.client, *pair.server, data, 3333, 1000000, pieces);
    ASSERT_EQ(got.size(), data.size());
    EXPECT_TRUE(got == data);
  }
}

INSTANTIATE_TEST_SUITE_P(proto, proto_stream_integrity, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "SendFromAnyMemory" : "StagingCopy";
                         });

TEST(proto_stream, EmptyIovecElementsAreSkipped) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(SmallMtu()), &pair));
  char a[] = "abc", b[] = "defgh";
  // Zero-length elements with a null base, first, between and last; combined and direct.
  iovec iov[] = {{nullptr, 0}, {a, 3}, {nullptr, 0}, {b, 5}, {nullptr, 0}};
  ASSERT_EQ(pair.client->Send(iov, 5).value(), 8u);
  ASSERT_TRUE(pair.client->Flush().ok());
  pair.client->SetNoDelay(true);
  ASSERT_EQ(pair.client->Send(iov, 5).value(), 8u);
  EXPECT_EQ(pair.client->Send(iov, 1).value(), 0u);  // nothing at all
  EXPECT_EQ(pair.client->Send(nullptr, 0).value(), 0u);
  std::vector<uint8_t> got = ReadExactly(pair, *pair.server, 16);
  EXPECT_EQ(Str(got), "abcdefghabcdefgh");
  // Scatter into iovecs with empty elements too.
  ASSERT_TRUE(SendStr(*pair.client, "0123456789").ok());
  char x[4], y[6];
  iovec out[] = {{nullptr, 0}, {x, 4}, {nullptr, 0}, {y, 6}};
  size_t n = 0;
  for (int i = 0; i < 1000 && n == 0; ++i) {
    Result<size_t> r = pair.server->Recv(out, 4, false);
    if (r.ok()) n = r.value();
    pair.client->Progress();
  }
  ASSERT_EQ(n, 10u);
  EXPECT_EQ(std::string(x, 4) + std::string(y, 6), "0123456789");
}

// 16-bit packet numbers wrap; more than 65536 packets must flow without a false "gap".
TEST(proto_stream, SequenceNumbersWrap) {
  StreamParams params = SmallMtu(64);
  params.combine.enabled = false;
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(params), &pair));
  std::vector<uint8_t> data = Pattern(64 * 70000 + 5, 77);
  std::vector<uint8_t> got = Transfer(*pair.client, *pair.server, data, 65536, 1000000);
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  EXPECT_GT(pair.client->Stats().packets_sent, 70000u);
  EXPECT_EQ(pair.client->GetReadiness().error, 0);
  EXPECT_EQ(pair.server->GetReadiness().error, 0);
}

// Random schedules over small, asymmetric windows and thresholds: sends and reads of random sizes,
// flushes, peeks, one side frozen for stretches (so ACKs and data pile up unreaped in its queue),
// half-closes. The w/t + 1 receives reserved for ACKs and the FIN must always suffice (the provider
// breaks the connection on a send that finds none), and each direction's bytes must arrive whole,
// in order, then EOF.
// ---- MSG_PEEK and FIONREAD ---------------------------------------------------------------------

TEST(proto_stream, PeekLeavesDataQueued) {
  StreamParams params = SmallMtu();
  params.combine.enabled = false;
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(params), &pair));
  Stream& s = *pair.server;
  ASSERT_TRUE(SendStr(*pair.client, "hello world").ok());  // one packet per send
  ASSERT_TRUE(SendStr(*pair.client, "abc").ok());
  ASSERT_TRUE(SendStr(*pair.client, "def").ok());
  ASSERT_TRUE(PumpUntil(pair, [&] { return s.Available() == 17; }));
  char buf[32];
  ASSERT_EQ(RecvBytes(s, buf, 5, true).value(), 5u);
  EXPECT_EQ(std::string(buf, 5), "hello");
  ASSERT_EQ(RecvBytes(s, buf, 32, true).value(), 17u);  // across packet boundaries
  EXPECT_EQ(std::string(buf, 17), "hello worldabcdef");
  EXPECT_EQ(s.Available(), 17u);
  ASSERT_EQ(RecvBytes(s, buf, 5).value(), 5u);
  EXPECT_EQ(std::string(buf, 5), "hello");
  EXPECT_EQ(s.Available(), 12u);
  ASSERT_EQ(RecvBytes(s, buf, 7).value(), 7u);  // the rest of a packet and part of the next
  EXPECT_EQ(std::string(buf, 7), " worlda");
  char x[2], y[10];
  iovec iov[] = {{x, 2}, {y, 10}};
  ASSERT_EQ(s.Recv(iov, 2, true).value(), 5u);  // peeking from a partly read packet
  EXPECT_EQ(std::string(x, 2) + std::string(y, 3), "bcdef");
  EXPECT_EQ(s.Available(), 5u);
  ASSERT_EQ(s.Recv(iov, 2, false).value(), 5u);
  EXPECT_EQ(std::string(x, 2) + std::string(y, 3), "bcdef");
  EXPECT_EQ(s.Available(), 0u);
  EXPECT_EQ(RecvBytes(s, buf, 32, true).status().code(), EAGAIN);
  EXPECT_FALSE(s.GetReadiness().readable);
}

// A peek does not free buffers, so it returns no credits: only real reads open the window.
TEST(proto_stream, PeekDoesNotReturnCredits) {
  const uint32_t mtu = 4096;
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(SmallMtu(mtu)), &pair));
  std::vector<uint8_t> data = Pattern(31 * mtu, 8);
  ASSERT_EQ(SendBytes(*pair.client, data.data(), data.size()).value(), data.size());
  std::vector<uint8_t> buf(data.size());
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(RecvBytes(*pair.server, buf.data(), buf.size(), true).value(), data.size());
  }
  EXPECT_TRUE(buf == data);
  EXPECT_EQ(pair.server->Stats().explicit_acks_sent, 0u);
  pair.client->Progress();
  EXPECT_EQ(pair.client->Stats().credits, 0u);
  ASSERT_EQ(RecvBytes(*pair.server, buf.data(), buf.size()).value(), data.size());
  EXPECT_EQ(pair.server->Stats().explicit_acks_sent, 1u);
  pair.client->Progress();
  EXPECT_EQ(pair.client->Stats().credits, 32u);
}

// ---- half-close, close, abort ------------------------------------------------------------------

TEST(proto_stream, HalfCloseThenTheOtherDirectionStillWorks) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(SmallMtu(4096)), &pair));
  Stream& c = *pair.client;
  Stream& s = *pair.server;
  std::vector<uint8_t> data = Pattern(20000, 12);
  ASSERT_EQ(SendBytes(c, data.data(), data.size()).value(), data.size());
  ASSERT_TRUE(c.ShutdownWrite().ok());
  ASSERT_TRUE(c.ShutdownWrite().ok());  // idempotent: one FIN
  EXPECT_EQ(SendBytes(c, "x", 1).status().code(), EPIPE);
  EXPECT_TRUE(c.GetReadiness().write_closed);
  EXPECT_FALSE(c.GetReadiness().writable);

  // Data first, then EOF, and EOF again.
  testing::Drained d = DrainAll(pair, s);
  EXPECT_TRUE(d.eof);
  EXPECT_EQ(d.error, 0);
  EXPECT_TRUE(d.bytes == data);
  uint8_t buf[8];
  EXPECT_EQ(RecvBytes(s, buf, sizeof(buf)).value(), 0u);
  Readiness sr = s.GetReadiness();
  EXPECT_TRUE(sr.peer_closed);
  EXPECT_TRUE(sr.readable);
  EXPECT_TRUE(sr.writable);
  ASSERT_TRUE(PumpUntil(pair, [&] { return c.Stats().phase == ClosePhase::kFinWait2; }));
  EXPECT_EQ(s.Stats().phase, ClosePhase::kCloseWait);
  EXPECT_TRUE(c.Finished());  // our FIN is acknowledged: nothing of ours is left
  EXPECT_FALSE(s.Finished());

  // The server still sends, the client still reads.
  std::vector<uint8_t> back = Pattern(50000, 13);
  EXPECT_TRUE(Transfer(s, c, back) == back);
  ASSERT_TRUE(s.ShutdownWrite().ok());
  EXPECT_EQ(s.Stats().phase, ClosePhase::kLastAck);
  testing::Drained e = DrainAll(pair, c);
  EXPECT_TRUE(e.eof);
  EXPECT_TRUE(e.bytes.empty());
  ASSERT_TRUE(PumpUntil(pair, [&] { return c.Finished() && s.Finished(); }));
  EXPECT_EQ(c.Stats().phase, ClosePhase::kClosed);
  EXPECT_EQ(s.Stats().phase, ClosePhase::kClosed);
  EXPECT_EQ(c.GetReadiness().error, 0);
  EXPECT_EQ(s.GetReadiness().error, 0);
}

TEST(proto_stream, ShutdownWriteSendsCombinedDataBeforeTheFin) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(SmallMtu()), &pair));
  const uint64_t base = pair.client->Stats().packets_sent;
  ASSERT_TRUE(SendStr(*pair.client, "last words").ok());  // buffered
  ASSERT_TRUE(pair.client->ShutdownWrite().ok());
  EXPECT_EQ(pair.client->Stats().packets_sent, base + 2);  // DATA, then FIN
  testing::Drained d = DrainAll(pair, *pair.server);
  EXPECT_EQ(Str(d.bytes), "last words");
  EXPECT_TRUE(d.eof);
}

// FINs that cross: each side sends its FIN before it has seen the peer's.
TEST(proto_stream, SimultaneousCloseFinishesBothSides) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(SmallMtu()), &pair));
  Stream& c = *pair.client;
  Stream& s = *pair.server;
  // Hold the client's packets back from the server's next polls, so the server's own
  // ShutdownWrite (which reaps first) cannot see the client's FIN yet.
  testing::FaultPlan hold;
  hold.delay_polls = 5;
  testing::Loopback(c).set_fault_plan(hold);
  ASSERT_TRUE(SendStr(c, "c->s").ok());
  ASSERT_TRUE(SendStr(s, "s->c").ok());
  ASSERT_TRUE(c.ShutdownWrite().ok());
  EXPECT_EQ(c.Stats().phase, ClosePhase::kFinWait1);
  EXPECT_FALSE(c.Finished());  // no FINACK yet
  ASSERT_TRUE(s.ShutdownWrite().ok());
  EXPECT_EQ(s.Stats().phase, ClosePhase::kFinWait1);
  ASSERT_TRUE(c.Progress().ok());  // the server's FIN arrives before the FINACK of ours
  EXPECT_EQ(c.Stats().phase, ClosePhase::kLastAck);
  ASSERT_TRUE(PumpUntil(pair, [&] { return c.Finished() && s.Finished(); }));
  EXPECT_EQ(c.Stats().phase, ClosePhase::kClosed);
  EXPECT_EQ(s.Stats().phase, ClosePhase::kClosed);
  testing::Drained dc = DrainAll(pair, c), ds = DrainAll(pair, s);
  EXPECT_EQ(Str(dc.bytes), "s->c");
  EXPECT_EQ(Str(ds.bytes), "c->s");
  EXPECT_TRUE(dc.eof && ds.eof);
}

// The close thread releases a stream once Finished(), without waiting for the peer's FIN.
TEST(proto_stream, ReleasedAfterFinishedThePeerReadsEofThenResets) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(SmallMtu()), &pair));
  std::vector<uint8_t> data = Pattern(10000, 15);
  ASSERT_EQ(SendBytes(*pair.client, data.data(), data.size()).value(), data.size());
  ASSERT_TRUE(pair.client->ShutdownWrite().ok());
  ASSERT_TRUE(PumpUntil(pair, [&] { return pair.client->Finished(); }));
  pair.client.reset();
  uint8_t buf[20000];
  size_t have = 0;
  Result<size_t> r = size_t{0};
  for (int i = 0; i < 100; ++i) {
    r = RecvBytes(*pair.server, buf + have, sizeof(buf) - have);
    if (!r.ok() || r.value() == 0) break;
    have += r.value();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), 0u);  // EOF: everything before the FIN was whole
  EXPECT_EQ(have, data.size());
  EXPECT_EQ(0, memcmp(buf, data.data(), data.size()));
  EXPECT_EQ(SendStr(*pair.server, "too late").status().code(), ECONNRESET);
  EXPECT_FALSE(pair.server->Finished());
}

// A peer that sent everything, closed and vanished before we reaped anything (a client that
// finished before accept()): the link is broken, so reposting the first buffer fails, but every
// message that landed before the break is still the peer's whole stream.
TEST(proto_stream, PeerThatFinishedAndVanishedBeforeWeReapedIsDelivered) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(MakePair(SharedLoopback(), Symmetric(SmallMtu()), &pair));
  ASSERT_TRUE(pair.client->Progress().ok());  // the server's WAKEUP opens the client's window
  std::vector<uint8_t> data = Pattern(50000, 16);
  ASSERT_EQ(SendBytes(*pair.client, data.data(), data.size()).value(), data.size());
  ASSERT_TRUE(pair.client->ShutdownWrite().ok());
  pair.client.reset();
  EXPECT_EQ(pair.server->Available(), data.size());
  EXPECT_TRUE(pair.server->GetReadiness().peer_closed);
  std::vector<uint8_t> got(data.size() + 1);
  size_t have = 0;
  Result<size_t> r = size_t{0};
  for (int i = 0; i < 100; ++i) {
    r = RecvBytes(*pair.server, got.data() + have, got.size() - have);
    if (!r.ok() || r.value() == 0) break;
    have += r.value();
  }
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), 0u);
  ASSERT_EQ(have, data.size());
  got.resize(have);
  EXPECT_TRUE(got == data);
}

TEST(proto_stream, AbortResetsThePeer) {
  StreamParams params = SmallMtu();
  params.combine.enabled = false;
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(params), &pair));
  ASSERT_TRUE(SendStr(*pair.client, "before the reset").ok());
  pair.client->Abort();
  EXPECT_EQ(pair.client->Progress().code(), ECONNRESET);
  EXPECT_EQ(SendStr(*pair.client, "x").status().code(), ECONNRESET);
  uint8_t buf[4];
  EXPECT_EQ(RecvBytes(*pair.client, buf, 4).status().code(), ECONNRESET);
  // The peer gets what had fully arrived (never part of a packet), then ECONNRESET.
  testing::Drained d = DrainAll(pair, *pair.server);
  EXPECT_EQ(d.error, ECONNRESET);
  EXPECT_FALSE(d.eof);
  const std::string got = Str(d.bytes);
  EXPECT_TRUE(got.empty() || got == "before the reset") << got;
  Readiness r = pair.server->GetReadiness();
  EXPECT_EQ(r.error, ECONNRESET);
  EXPECT_TRUE(r.readable);
  EXPECT_EQ(SendStr(*pair.server, "y").status().code(), ECONNRESET);
  EXPECT_FALSE(pair.server->Finished());
  pair.client->Abort();  // idempotent
}

TEST(proto_stream, FailFromOutsideIsStickyAndResetsThePeer) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(SmallMtu()), &pair));
  pair.server->Fail(ETIMEDOUT);
  EXPECT_EQ(pair.server->Progress().code(), ETIMEDOUT);
  pair.server->Fail(EIO);  // the first error sticks
  EXPECT_EQ(pair.server->GetReadiness().error, ETIMEDOUT);
  EXPECT_EQ(DrainAll(pair, *pair.client).error, ECONNRESET);
  EXPECT_EQ(pair.client->ShutdownWrite().code(), ECONNRESET);
}

TEST(proto_stream, UsersCountForkHolders) {
  StreamPair pair;
  ASSERT_NO_FATAL_FAILURE(OpenLoopbackPair(Symmetric(SmallMtu()), &pair));
  pair.client->AddUser();
  pair.client->AddUser();
  EXPECT_FALSE(pair.client->DropUser());
  EXPECT_FALSE(pair.client->DropUser());
  EXPECT_TRUE(pair.client->DropUser());  // the creator's own reference was the last
}

}  // namespace
}  // namespace san::proto
