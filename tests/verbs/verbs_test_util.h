// Helpers for the verbs tests: the address to use, a connected pair of proto::Streams over the
// verbs provider, and a blocking wait that sleeps on the doorbell (never busy-polls: under
// emulation a spinning peer starves rxe's kernel work). Test-only; gtest assertions inside.
#pragma once

#include <poll.h>

#include <cstdlib>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "../fabric/fabric_test_util.h"
#include "sanlib/fabric/registry.h"
#include "sanlib/proto/stream.h"

namespace san::verbs_testing {

// An address of an RDMA port (SAN_TEST_VERBS_IP, set by deploy/softroce/guest_tests.sh).
inline const char* VerbsIp() {
  const char* ip = std::getenv("SAN_TEST_VERBS_IP");
  return ip != nullptr && *ip != '\0' ? ip : "127.0.0.1";
}

#define SAN_SKIP_WITHOUT_VERBS()                                                          \
  do {                                                                                    \
    if (::san::fabric::GetProvider("verbs") == nullptr) {                                 \
      GTEST_SKIP() << "no verbs here: " << ::san::fabric::WhyUnavailable("verbs")         \
                   << " (deploy/softroce/softroce.sh runs this on Soft-RoCE in a guest)"; \
    }                                                                                     \
  } while (0)

// Makes progress on `s`; if nothing is pending, arms the doorbell and sleeps on it up to `ms`.
inline void WaitALittle(proto::Stream& s, int ms = 20) {
  s.Progress();
  if (s.endpoint().Arm()) {
    pollfd p{s.endpoint().notify_fd(), POLLIN, 0};
    poll(&p, 1, ms);
    s.endpoint().ClearNotify();
  }
}

struct StreamPair {
  std::unique_ptr<fabric::Listener> listener;
  std::unique_ptr<proto::Stream> client;
  std::unique_ptr<proto::Stream> server;
};

inline void MakeStreamPair(StreamPair* pair, const proto::StreamParams& params = {}) {
  fabric::Provider* provider = fabric::GetProvider("verbs");
  ASSERT_NE(provider, nullptr);
  const uint16_t port = fabric::testing::NextPort();
  sockaddr_in addr = fabric::testing::Ipv4(VerbsIp(), port);
  auto listener = provider->Listen(fabric::testing::Sa(addr), sizeof(addr),
                                   proto::Stream::EndpointAttrFor(params));
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  pair->listener = std::move(listener).value();
  auto ep = provider->CreateEndpoint(proto::Stream::EndpointAttrFor(params));
  ASSERT_TRUE(ep.ok()) << ep.status().ToString();
  auto client = proto::Stream::Create(std::move(ep).value(), provider->capabilities(), params);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  pair->client = std::move(client).value();
  Status connect_status;
  std::thread t([&] {
    connect_status = pair->client->endpoint().Connect(fabric::testing::Sa(addr), sizeof(addr), {});
  });
  auto request = fabric::testing::WaitRequest(pair->listener.get());
  if (request.ok()) {
    auto server =
        proto::Stream::Create(std::move(request).value(), provider->capabilities(), params);
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
  ASSERT_TRUE(pair->client->Start().ok());
  ASSERT_TRUE(pair->server->Start().ok());
}

inline uint64_t Fnv1a(const uint8_t* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// Byte i of the pattern for `seed`: cheap to check at the receiver without storing it.
inline uint8_t PatternByte(uint64_t i, uint32_t seed) {
  return static_cast<uint8_t>((i * 2654435761u + seed) >> 7);
}

}  // namespace san::verbs_testing
