// The connection thread runs a provider's Accept without holding its lock (docs/verbs.md,
// "Accept outside the lock"). A verbs Accept waits a round trip for the client's RTU; with the
// lock held across it, every accept() in the process (any listening socket's Claim) waited too.
// Here the loopback provider's `accept_delay_us` plays that slow handshake in one process: while
// one request's Accept is in progress, a Claim for another listener returns at once, and a Claim
// for the very channel being accepted waits for it and gets it, connected and carrying bytes. And
// handshakes overlap (hold_accepts): the thread does not serve them one at a time.
#include <netinet/in.h>

#include <chrono>
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "../fabric/fabric_test_util.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/connection_thread.h"
#include "sanlib/socket/socket_table.h"
#include "support/loopback/loopback_provider.h"

namespace san {
namespace {

using Clock = std::chrono::steady_clock;

proto::FourTuple TupleFor(uint16_t client_port, uint16_t server_port) {
  proto::FourTuple t;
  sockaddr_in c = fabric::testing::Ipv4("127.0.0.1", client_port);
  sockaddr_in s = fabric::testing::Ipv4("127.0.0.1", server_port);
  std::memcpy(&t.client, &c, sizeof c);
  std::memcpy(&t.server, &s, sizeof s);
  return t;
}

TEST(ConnectionThreadAccept, SlowAcceptHoldsUpNoOtherClaimAndItsOwnClaimWaitsForIt) {
  constexpr int kAcceptDelayMs = 2000;
  fabric::loopback::FaultPlan plan;
  plan.accept_delay_us = kAcceptDelayMs * 1000;
  fabric::loopback::LoopbackProvider provider(plan);
  const proto::StreamParams params;
  const fabric::EndpointAttr attr = proto::Stream::EndpointAttrFor(params);

  SocketTable table;
  ConnectionThread connections(table);
  const uint16_t port = fabric::testing::NextPort();
  const sockaddr_in listen_addr = fabric::testing::Ipv4("127.0.0.1", port);
  sockaddr_storage listen_ss{};
  std::memcpy(&listen_ss, &listen_addr, sizeof listen_addr);
  auto listener = provider.Listen(fabric::testing::Sa(listen_addr), sizeof listen_addr, attr);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  // Listening-socket numbers are only keys to the connection thread.
  constexpr int kSlowListener = 1001, kOtherListener = 1002;
  ASSERT_TRUE(connections
                  .AddListener(kSlowListener, listen_ss, std::move(listener).value(),
                               provider.capabilities(), params)
                  .ok());

  const proto::FourTuple tuple = TupleFor(40001, port);
  auto ep = provider.CreateEndpoint(attr);
  ASSERT_TRUE(ep.ok());
  auto client = proto::Stream::Create(std::move(ep).value(), provider.capabilities(), params);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  Status connect_status;
  std::thread connector([&] {
    connect_status = client.value()->endpoint().Connect(
        fabric::testing::Sa(listen_addr), sizeof listen_addr, proto::EncodeConnectRequest(tuple));
  });
  // Let the connection thread pick the request up and enter the (slow) Accept.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  // Another listening socket's accept() does not wait for that handshake.
  const auto t0 = Clock::now();
  EXPECT_EQ(connections.Claim(kOtherListener, TupleFor(40002, port)), nullptr);
  const auto other_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  EXPECT_LT(other_ms, kAcceptDelayMs / 2) << "a Claim waited behind another socket's Accept";

  // The channel being accepted: its Claim waits for the Accept and gets the connected stream.
  std::unique_ptr<proto::Stream> server = connections.Claim(kSlowListener, tuple);
  connector.join();
  ASSERT_TRUE(connect_status.ok()) << connect_status.ToString();
  ASSERT_NE(server, nullptr) << "the settling channel was not handed to its accept()";
  ASSERT_TRUE(client.value()->Start().ok());

  // It is the client's peer: bytes arrive (bounded wait; loopback delivers at once).
  const char msg[] = "settled";
  iovec out{const_cast<char*>(msg), sizeof msg};
  size_t sent = 0;
  char buf[sizeof msg] = {};
  iovec in{buf, sizeof buf};
  size_t got = 0;
  for (int i = 0; i < 2000 && got < sizeof msg; ++i) {
    if (sent == 0) {
      Result<size_t> r = client.value()->Send(&out, 1);
      if (r.ok()) sent = r.value();
    }
    client.value()->Progress();
    server->Progress();
    Result<size_t> r = server->Recv(&in, 1, false);
    if (r.ok()) got = r.value();
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(got, sizeof msg);
  EXPECT_STREQ(buf, msg);
  EXPECT_EQ(connections.pending_count(), 0u);

  connections.RemoveListener(kSlowListener);
  server->Abort();
  client.value()->Abort();
}

// Handshakes overlap: with the loopback provider holding every handshake open (hold_accepts, the
// stand-in for verbs waiting on its clients' RTUs), the connection thread still takes the second
// client's request while the first is unfinished -- both channels are filed, settling, at once.
// (When it served one handshake at a time, the second request waited: this count stayed at 1.)
// Then the handshakes are let go, and each client's channel is claimed by its own tuple.
TEST(ConnectionThreadAccept, HandshakesOverlap) {
  fabric::loopback::FaultPlan plan;
  plan.hold_accepts = true;
  fabric::loopback::LoopbackProvider provider(plan);
  const proto::StreamParams params;
  const fabric::EndpointAttr attr = proto::Stream::EndpointAttrFor(params);
  SocketTable table;
  ConnectionThread connections(table);
  const uint16_t port = fabric::testing::NextPort();
  const sockaddr_in listen_addr = fabric::testing::Ipv4("127.0.0.1", port);
  sockaddr_storage listen_ss{};
  std::memcpy(&listen_ss, &listen_addr, sizeof listen_addr);
  auto listener = provider.Listen(fabric::testing::Sa(listen_addr), sizeof listen_addr, attr);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  constexpr int kListener = 1003;
  ASSERT_TRUE(connections
                  .AddListener(kListener, listen_ss, std::move(listener).value(),
                               provider.capabilities(), params)
                  .ok());
  constexpr int kClients = 2;
  std::unique_ptr<proto::Stream> clients[kClients];
  Status statuses[kClients];
  std::thread connectors[kClients];
  for (int i = 0; i < kClients; ++i) {
    auto ep = provider.CreateEndpoint(attr);
    ASSERT_TRUE(ep.ok());
    auto c = proto::Stream::Create(std::move(ep).value(), provider.capabilities(), params);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    clients[i] = std::move(c).value();
    connectors[i] = std::thread([&, i] {
      statuses[i] = clients[i]->endpoint().Connect(
          fabric::testing::Sa(listen_addr), sizeof listen_addr,
          proto::EncodeConnectRequest(TupleFor(static_cast<uint16_t>(41001 + i), port)));
    });
  }
  // Both requests taken while neither handshake has finished (bounded wait, then the verdict).
  const auto deadline = Clock::now() + std::chrono::seconds(4);
  while (connections.pending_count() < kClients && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(connections.pending_count(), size_t{kClients})
      << "handshakes were served one at a time";
  provider.ReleaseAccepts();
  for (std::thread& t : connectors) t.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].ToString();
    std::unique_ptr<proto::Stream> server =
        connections.Claim(kListener, TupleFor(static_cast<uint16_t>(41001 + i), port));
    ASSERT_NE(server, nullptr) << "client " << i;
    server->Abort();
    clients[i]->Abort();
  }
  connections.RemoveListener(kListener);
}

}  // namespace
}  // namespace san
