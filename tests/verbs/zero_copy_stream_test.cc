// The stream's sends from the application's memory (StreamParams::zero_copy_min, the provider's
// kCapRegisteredSend; docs/protocol.md "Large messages over verbs"), on every host over the
// loopback provider, which emulates the capability (registration checks the memory is mapped and
// counts what is sent from it). The same path over real verbs runs in verbs_stream_test and
// verbs_socket_test inside the Soft-RoCE guest.
//
// What must hold: large sends go from the caller's buffer (counted by the provider, not only by
// the stream), every registration is ended before Send returns, the bytes are exact even when the
// caller scribbles its buffer right after Send returns, small sends and a zero threshold do not
// take the path, a refused registration falls back to copying (and stays off), and a connection
// that breaks mid-send gives an error, with nothing left registered, never a hang.
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../proto/stream_test_util.h"
#include "sanlib/common/clock.h"

namespace san::proto {
namespace {

using testing::FaultPlan;
using testing::Loopback;
using testing::LoopbackProvider;
using testing::OpenPair;
using testing::Pattern;
using testing::PumpUntil;
using testing::StreamPair;

constexpr uint32_t kMin = 64 << 10;

testing::PairOptions ZeroCopy(uint32_t min = kMin) {
  StreamParams p;
  p.zero_copy_min = min;
  return testing::Symmetric(p);
}

// Reads everything the writer has sent into `out`, then pumps until the writer's window is whole
// again if it gets there (the last credits of a burst wait for a piggyback): deterministic in one
// thread.
void DrainAndSettle(StreamPair& p, Stream& reader, Stream& writer, std::vector<uint8_t>* out) {
  std::vector<uint8_t> buf(1 << 20);
  const uint64_t sent = writer.Stats().bytes_sent;
  ASSERT_TRUE(PumpUntil(p, [&] {
    for (;;) {
      const iovec iov{buf.data(), buf.size()};
      Result<size_t> r = reader.Recv(&iov, 1, false);
      if (!r.ok() || r.value() == 0) break;
      out->insert(out->end(), buf.data(), buf.data() + r.value());
    }
    return reader.Stats().bytes_received == sent;
  }));
  PumpUntil(
      p,
      [&] {
        const StreamStats st = writer.Stats();
        return st.credits == st.window;
      },
      1000);
}

// Sends all of `data` from one buffer, in Send calls as large as the window allows, reading at
// the peer between calls. The source is scribbled after every call: what was sent is gone from
// the caller's memory, so the receiver must already hold it.
std::vector<uint8_t> SendScribbling(StreamPair& p, const std::vector<uint8_t>& data,
                                    int* registrations_left) {
  std::vector<uint8_t> src = data, got;
  *registrations_left = 0;
  for (size_t sent = 0; sent < src.size();) {
    const iovec iov{src.data() + sent, src.size() - sent};
    Result<size_t> r = p.client->Send(&iov, 1);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) break;
    *registrations_left += Loopback(*p.client).registered_regions();
    std::memset(src.data() + sent, 0xEE, r.value());
    sent += r.value();
    DrainAndSettle(p, *p.server, *p.client, &got);
  }
  return got;
}

TEST(ZeroCopyStream, LargeSendsGoFromTheCallersMemoryBytesExact) {
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenPair(testing::SharedLoopback(), ZeroCopy(), &p));
  // 127 packets of 32 KiB: the first call has 31 credits (the WAKEUP took one), the next three
  // the whole window of 32 each, so every byte is part of a send large enough for the path.
  const std::vector<uint8_t> data = Pattern(127u << 15, 11);
  const uint64_t in_place_before = Loopback(*p.client).in_place_bytes();
  int left = -1;
  const std::vector<uint8_t> got = SendScribbling(p, data, &left);
  EXPECT_EQ(left, 0) << "a registration outlived its Send";
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  const StreamStats st = p.client->Stats();
  EXPECT_EQ(st.zero_copy_bytes_sent, data.size());
  EXPECT_GE(st.zero_copy_sends, 4u);
  EXPECT_EQ(st.zero_copy_refused, 0u);
  EXPECT_EQ(st.bytes_sent, data.size());
  // The provider, not only the stream, says the bytes went from registered memory.
  EXPECT_EQ(Loopback(*p.client).in_place_bytes() - in_place_before, data.size());
  EXPECT_EQ(p.server->Stats().bytes_received, data.size());
}

TEST(ZeroCopyStream, SmallSendsAndAZeroThresholdCopy) {
  for (uint32_t min : {kMin, 0u}) {
    StreamPair p;
    ASSERT_NO_FATAL_FAILURE(OpenPair(testing::SharedLoopback(), ZeroCopy(min), &p));
    // Below the threshold (min != 0), or any size with the path off (min == 0).
    const std::vector<uint8_t> data = Pattern(min == 0 ? (1u << 20) : kMin - 1, 5);
    int left = -1;
    const std::vector<uint8_t> got = SendScribbling(p, data, &left);
    EXPECT_TRUE(got == data);
    EXPECT_EQ(p.client->Stats().zero_copy_sends, 0u) << "min " << min;
    EXPECT_EQ(Loopback(*p.client).in_place_bytes(), 0u) << "min " << min;
  }
}

// The window decides too: with fewer credits free than the threshold's worth of packets, a large
// send copies (registering for a packet or two would cost more than it saves).
TEST(ZeroCopyStream, TooLittleWindowCopies) {
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenPair(testing::SharedLoopback(), ZeroCopy(), &p));
  const uint32_t packet = p.client->Stats().mtu;
  // Use the window up until less than kMin of it is left, with nobody reading.
  std::vector<uint8_t> filler(packet);
  while (size_t{p.client->Stats().credits} * packet >= kMin) {
    const iovec iov{filler.data(), filler.size()};
    ASSERT_TRUE(p.client->Send(&iov, 1).ok());
  }
  ASSERT_GT(p.client->Stats().credits, 0u);
  std::vector<uint8_t> big(1 << 20, 7);
  const iovec iov{big.data(), big.size()};
  Result<size_t> r = p.client->Send(&iov, 1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r.value(), 0u);
  EXPECT_EQ(p.client->Stats().zero_copy_sends, 0u);
}

TEST(ZeroCopyStream, RefusedRegistrationCopiesAndStaysOff) {
  FaultPlan plan;
  plan.refuse_register = 1;
  LoopbackProvider provider(plan);
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenPair(&provider, ZeroCopy(), &p));
  const std::vector<uint8_t> data = Pattern(3u << 20, 3);
  int left = -1;
  const std::vector<uint8_t> got = SendScribbling(p, data, &left);
  ASSERT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  const StreamStats st = p.client->Stats();
  EXPECT_EQ(st.zero_copy_refused, 1u);  // asked once: off for the connection afterwards
  EXPECT_EQ(st.zero_copy_sends, 0u);
  EXPECT_EQ(Loopback(*p.client).in_place_bytes(), 0u);
  EXPECT_EQ(Loopback(*p.client).registered_regions(), 0);
}

// The connection breaks in the middle of a zero-copy Send (the 5th PostSend: the WAKEUP was the
// first, so after three DATA packets): the call fails with ECONNRESET at once, its registration
// is ended, and the peer reads what had landed, then the reset.
TEST(ZeroCopyStream, BreakMidSendIsAnErrorNothingStaysRegistered) {
  FaultPlan plan;
  plan.break_at_send = 5;
  LoopbackProvider provider(plan);
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenPair(&provider, ZeroCopy(), &p));
  std::vector<uint8_t> data = Pattern(1u << 20, 9);
  const iovec iov{data.data(), data.size()};
  Result<size_t> r = p.client->Send(&iov, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ECONNRESET);
  EXPECT_EQ(Loopback(*p.client).registered_regions(), 0);
  // The path was taken: three packets went from the caller's memory before the break.
  EXPECT_EQ(Loopback(*p.client).in_place_bytes(), 3u * p.client->Stats().mtu);
  std::vector<uint8_t> got(2u << 20);
  size_t have = 0;
  int error = 0;
  ASSERT_TRUE(PumpUntil(p, [&] {
    const iovec in{got.data() + have, got.size() - have};
    Result<size_t> k = p.server->Recv(&in, 1, false);
    if (k.ok()) have += k.value();
    if (!k.ok() && !k.status().would_block()) error = k.status().code();
    return error != 0;
  }));
  EXPECT_EQ(error, ECONNRESET);
  EXPECT_EQ(0, std::memcmp(got.data(), data.data(), have));
  // Later sends fail too, without registering anything.
  r = p.client->Send(&iov, 1);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(Loopback(*p.client).registered_regions(), 0);
}

// The peer is gone before the send: an error, at once.
TEST(ZeroCopyStream, PeerGoneBeforeSendIsAnError) {
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenPair(testing::SharedLoopback(), ZeroCopy(), &p));
  p.server.reset();
  std::vector<uint8_t> data = Pattern(1u << 20, 1);
  const iovec iov{data.data(), data.size()};
  Result<size_t> r = p.client->Send(&iov, 1);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ECONNRESET);
  EXPECT_EQ(Loopback(*p.client).registered_regions(), 0);
}

// Threads: on each stream one thread sends 8 MiB in 1 MiB zero-copy calls while another reads
// the peer's 8 MiB, so the sender's wait for its completions (which lets the lock go while it
// yields) interleaves with a reader of the same stream. Every byte checked; bounded by a deadline.
TEST(ZeroCopyStream, SendersAndReadersOnBothStreamsAtOnce) {
  StreamPair p;
  ASSERT_NO_FATAL_FAILURE(OpenPair(testing::SharedLoopback(), ZeroCopy(), &p));
  constexpr size_t kBytes = 8u << 20;
  const std::vector<uint8_t> to_server = Pattern(kBytes, 21), to_client = Pattern(kBytes, 22);
  const uint64_t deadline = NowNs() + 60'000'000'000ull;
  auto sender = [&](Stream& s, const std::vector<uint8_t>& data, int* error) {
    for (size_t sent = 0; sent < data.size() && NowNs() < deadline;) {
      const iovec iov{const_cast<uint8_t*>(data.data()) + sent,
                      std::min<size_t>(1u << 20, data.size() - sent)};
      Result<size_t> r = s.Send(&iov, 1);
      if (r.ok()) {
        sent += r.value();
      } else if (!r.status().would_block()) {
        *error = r.status().code();
        return;
      } else {
        std::this_thread::yield();
      }
    }
  };
  auto reader = [&](Stream& s, std::vector<uint8_t>* got, int* error) {
    std::vector<uint8_t> buf(256 << 10);
    while (got->size() < kBytes && NowNs() < deadline) {
      const iovec iov{buf.data(), buf.size()};
      Result<size_t> r = s.Recv(&iov, 1, false);
      if (r.ok() && r.value() > 0) {
        got->insert(got->end(), buf.data(), buf.data() + r.value());
      } else if (!r.ok() && !r.status().would_block()) {
        *error = r.status().code();
        return;
      } else {
        s.Progress();
        std::this_thread::yield();
      }
    }
  };
  int errors[4] = {};
  std::vector<uint8_t> at_server, at_client;
  std::thread threads[] = {
      std::thread(sender, std::ref(*p.client), std::cref(to_server), &errors[0]),
      std::thread(sender, std::ref(*p.server), std::cref(to_client), &errors[1]),
      std::thread(reader, std::ref(*p.server), &at_server, &errors[2]),
      std::thread(reader, std::ref(*p.client), &at_client, &errors[3])};
  for (std::thread& t : threads) t.join();
  for (int e : errors) EXPECT_EQ(e, 0);
  EXPECT_TRUE(at_server == to_server);
  EXPECT_TRUE(at_client == to_client);
  EXPECT_GT(p.client->Stats().zero_copy_bytes_sent, 0u);
  EXPECT_GT(p.server->Stats().zero_copy_bytes_sent, 0u);
  EXPECT_EQ(Loopback(*p.client).registered_regions(), 0);
  EXPECT_EQ(Loopback(*p.server).registered_regions(), 0);
}

}  // namespace
}  // namespace san::proto
