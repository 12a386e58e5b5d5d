// Helpers for the Stream tests: a connected pair of proto::Streams over the loopback provider,
// and bounded single-thread pumps that move bytes between them. Test-only; gtest assertions inside.
//
// Nothing here sleeps: every loop is bounded by an iteration count (single-thread pumps, where the
// only thing that can make progress is the pump itself) or a deadline (the threaded tests).
#pragma once

#include <sys/uio.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "../fabric/fabric_test_util.h"
#include "sanlib/fabric/registry.h"
#include "sanlib/proto/stream.h"
#include "support/loopback/loopback_endpoint.h"
#include "support/loopback/loopback_provider.h"

namespace san::proto::testing {

using fabric::loopback::FaultPlan;
using fabric::loopback::LoopbackEndpoint;
using fabric::loopback::LoopbackProvider;

struct StreamPair {
  std::unique_ptr<fabric::Listener> listener;
  std::unique_ptr<Stream> client;
  std::unique_ptr<Stream> server;
};

struct PairOptions {
  StreamParams client_params;
  StreamParams server_params;
  uint32_t caps = 0;  // 0: the provider's capabilities
  bool start = true;  // Start() both (client first) after connecting
};

// Listens, creates the client Stream (posting its receives) and connects from a helper thread,
// creates the server Stream on the request and accepts: Stream::Create always runs before
// Connect/Accept, as the contract requires.
inline void MakePair(fabric::Provider* provider, const PairOptions& opt, StreamPair* pair) {
  const uint32_t caps = opt.caps ? opt.caps : provider->capabilities();
  const uint16_t port = fabric::testing::NextPort();
  sockaddr_in addr = fabric::testing::Ipv4("127.0.0.1", port);
  auto listener = provider->Listen(fabric::testing::Sa(addr), sizeof(addr),
                                   Stream::EndpointAttrFor(opt.server_params));
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  pair->listener = std::move(listener).value();
  auto ep = provider->CreateEndpoint(Stream::EndpointAttrFor(opt.client_params));
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  auto client = Stream::Create(std::move(ep).value(), caps, opt.client_params);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  pair->client = std::move(client).value();
  Status connect_status;
  std::thread t([&] {
    connect_status = pair->client->endpoint().Connect(fabric::testing::Sa(addr), sizeof(addr), {});
  });
  auto request = fabric::testing::WaitRequest(pair->listener.get());
  if (request.ok()) {
    auto server = Stream::Create(std::move(request).value(), caps, opt.server_params);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    if (server.ok()) {
      pair->server = std::move(server).value();
      Status s = pair->server->endpoint().Accept();
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
  }
  t.join();
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  ASSERT_TRUE(pair->server);
  ASSERT_TRUE(connect_status.ok()) << connect_status.ToString();
  if (opt.start) {
    Status s = pair->client->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = pair->server->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
}

inline LoopbackEndpoint& Loopback(Stream& s) {
  return dynamic_cast<LoopbackEndpoint&>(s.endpoint());
}

// Calls Progress on both until `done` holds; false if it did not within `rounds` rounds.
inline bool PumpUntil(StreamPair& p, const std::function<bool()>& done, int rounds = 100000) {
  for (int i = 0; i < rounds; ++i) {
    if (done()) return true;
    p.client->Progress();
    p.server->Progress();
  }
  return done();
}

// Both WAKEUPs handled: each side knows the other's window.
inline bool WindowsOpen(StreamPair& p) {
  return PumpUntil(p, [&] { return p.client->Stats().window > 1 && p.server->Stats().window > 1; });
}

inline std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

inline uint64_t Fnv1a(const uint8_t* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline Result<size_t> SendBytes(Stream& s, const void* data, size_t n) {
  iovec iov{const_cast<void*>(data), n};
  return s.Send(&iov, 1);
}

inline Result<size_t> RecvBytes(Stream& s, void* data, size_t n, bool peek = false) {
  iovec iov{data, n};
  return s.Recv(&iov, 1, peek);
}

// Splits [data, data+n) into an iovec array of the given piece sizes (the last piece takes the
// rest).
inline std::vector<iovec> Split(const uint8_t* data, size_t n, const std::vector<size_t>& pieces) {
  std::vector<iovec> iov;
  size_t at = 0;
  for (size_t i = 0; i < pieces.size() && at < n; ++i) {
    size_t len = i + 1 == pieces.size() ? n - at : std::min(pieces[i], n - at);
    iov.push_back(iovec{const_cast<uint8_t*>(data + at), len});
    at += len;
  }
  if (at < n) iov.push_back(iovec{const_cast<uint8_t*>(data + at), n - at});
  return iov;
}

// Moves `data` from `from` to `to` in one thread: sends as much as the window takes, flushes
// (standing in for the combine timer), receives into `recv_chunk`-sized reads, until everything
// arrived or `rounds` passed. Returns what arrived; errors are test failures.
inline std::vector<uint8_t> Transfer(Stream& from, Stream& to, const std::vector<uint8_t>& data,
                                     size_t recv_chunk = 65536, int rounds = 100000,
                                     const std::vector<size_t>& send_pieces = {}) {
  std::vector<uint8_t> got;
  std::vector<uint8_t> buf(recv_chunk);
  size_t sent = 0;
  for (int i = 0; i < rounds && got.size() < data.size(); ++i) {
    if (sent < data.size()) {
      std::vector<iovec> iov = send_pieces.empty()
                                   ? Split(data.data() + sent, data.size() - sent, {})
                                   : Split(data.data() + sent, data.size() - sent, send_pieces);
      if (iov.size() > IOV_MAX) iov.resize(IOV_MAX);
      Result<size_t> r = from.Send(iov.data(), static_cast<int>(iov.size()));
      if (r.ok()) {
        sent += r.value();
      } else {
        EXPECT_TRUE(r.status().would_block()) << r.status().ToString();
        if (!r.status().would_block()) break;
      }
    }
    // Every round, not only while sending: the last bytes may sit in the combine buffer waiting
    // for a credit, and only the timer (this) sends them if the window never becomes idle.
    from.Flush();
    Result<size_t> r = RecvBytes(to, buf.data(), buf.size());
    if (r.ok()) {
      EXPECT_GT(r.value(), 0u) << "unexpected EOF";
      if (r.value() == 0) break;
      got.insert(got.end(), buf.begin(), buf.begin() + r.value());
    } else {
      EXPECT_TRUE(r.status().would_block()) << r.status().ToString();
      if (!r.status().would_block()) break;
    }
    from.Progress();
  }
  EXPECT_EQ(got.size(), data.size())
      << "stalled: sent " << sent << ", sender " << from.Stats().credits << "/"
      << from.Stats().window << " credits, error " << from.GetReadiness().error;
  return got;
}

// Reads whatever is (or becomes) available within `rounds` Progress rounds, until EOF or error.
// `status` receives the final non-EAGAIN status (ok with eof=true at EOF).
struct Drained {
  std::vector<uint8_t> bytes;
  bool eof = false;
  int error = 0;
};
inline Drained DrainAll(StreamPair& p, Stream& reader, int rounds = 100000) {
  Drained d;
  uint8_t buf[4096];
  for (int i = 0; i < rounds; ++i) {
    Result<size_t> r = RecvBytes(reader, buf, sizeof(buf));
    if (r.ok() && r.value() == 0) {
      d.eof = true;
      return d;
    }
    if (r.ok()) {
      d.bytes.insert(d.bytes.end(), buf, buf + r.value());
      continue;
    }
    if (!r.status().would_block()) {
      d.error = r.status().code();
      return d;
    }
    p.client->Progress();
    p.server->Progress();
  }
  return d;
}

// Reads until `n` bytes arrived (or an error, EOF, or `rounds` empty rounds).
inline std::vector<uint8_t> ReadExactly(StreamPair& p, Stream& reader, size_t n,
                                        int rounds = 100000) {
  std::vector<uint8_t> got(n);
  size_t have = 0;
  for (int i = 0; i < rounds && have < n; ++i) {
    Result<size_t> r = RecvBytes(reader, got.data() + have, n - have);
    if (r.ok() && r.value() > 0) {
      have += r.value();
      continue;
    }
    if (!r.ok() && r.status().would_block()) {
      p.client->Progress();
      p.server->Progress();
      continue;
    }
    ADD_FAILURE() << (r.ok() ? std::string("EOF") : r.status().ToString()) << " after " << have;
    break;
  }
  got.resize(have);
  return got;
}

// ---- shorthands shared by the single-thread Stream tests ----

inline fabric::Provider* SharedLoopback() {
  fabric::Provider* p = fabric::loopback::SharedProvider();
  EXPECT_NE(p, nullptr);
  return p;
}

inline StreamParams SmallMtu(uint32_t mtu = 4096) {
  StreamParams p;
  p.mtu = mtu;
  return p;
}

// Both sides with the same parameters.
inline PairOptions Symmetric(const StreamParams& params) {
  PairOptions o;
  o.client_params = params;
  o.server_params = params;
  return o;
}

// Both sides with packets of at most `mtu` bytes; small sends combine unless `nodelay`.
inline PairOptions MtuOptions(uint32_t mtu, bool nodelay = true) {
  StreamParams params = SmallMtu(mtu);
  params.combine.enabled = !nodelay;
  return Symmetric(params);
}

// A connected, started pair over `provider` whose WAKEUPs have been handled on both sides.
inline void OpenPair(fabric::Provider* provider, const PairOptions& opt, StreamPair* pair) {
  ASSERT_NO_FATAL_FAILURE(MakePair(provider, opt, pair));
  ASSERT_TRUE(WindowsOpen(*pair));
}

// The same over the shared loopback provider.
inline void OpenLoopbackPair(const PairOptions& opt, StreamPair* pair) {
  OpenPair(SharedLoopback(), opt, pair);
}

// Leaves the client with one DATA packet unacknowledged (the state in which small sends combine):
// a fresh connection is idle, so its first small message goes at once; the server reads it, and
// the freed buffer's credit waits at the server for a piggyback or the ACK threshold.
inline void MakeClientBusy(StreamPair& p) {
  bool buffered = true;
  const iovec one{const_cast<char*>("#"), 1};
  ASSERT_EQ(p.client->Send(&one, 1, &buffered).value(), 1u);
  ASSERT_FALSE(buffered) << "a fresh connection's first small send must go at once";
  char got = 0;
  const iovec in{&got, 1};
  ASSERT_TRUE(PumpUntil(p, [&] {
    Result<size_t> r = p.server->Recv(&in, 1, false);
    return r.ok() && r.value() == 1;
  }));
  ASSERT_EQ(got, '#');
}

inline std::string Str(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

inline Result<size_t> SendStr(Stream& s, const std::string& text, bool* left_buffered = nullptr) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  return s.Send(&iov, 1, left_buffered);
}

}  // namespace san::proto::testing
