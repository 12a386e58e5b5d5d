// Helpers shared by the fabric tests: addresses, connecting a client/server pair, posting
// receives and waiting for completions. Test-only; gtest assertions inside.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "sanlib/common/clock.h"
#include "sanlib/fabric/provider.h"

namespace san::fabric::testing {

// A port unlikely to collide with a concurrently running test process.
inline uint16_t NextPort() {
  static std::atomic<uint32_t> counter{0};
  return static_cast<uint16_t>(20000 + (static_cast<uint32_t>(getpid()) % 2500) * 16 +
                               counter.fetch_add(1) % 16);
}

inline sockaddr_in Ipv4(const char* ip, uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  inet_pton(AF_INET, ip, &sin.sin_addr);
  return sin;
}

inline const sockaddr* Sa(const sockaddr_in& sin) {
  return reinterpret_cast<const sockaddr*>(&sin);
}

struct Pair {
  std::unique_ptr<Listener> listener;
  std::unique_ptr<Endpoint> client;
  std::unique_ptr<Endpoint> server;
  MemoryRegion client_buf;  // client_recvs * recv_size, receives posted with ids 1000+i
  MemoryRegion server_buf;  // server_recvs * recv_size, receives posted with ids 2000+i
  uint32_t recv_size = 0;
};

struct PairOptions {
  EndpointAttr attr;
  int client_recvs = 8;
  int server_recvs = 8;
  uint32_t recv_size = 4096;
  ConnectData data;
  const char* listen_ip = "127.0.0.1";
  const char* connect_ip = "127.0.0.1";
  bool dial_first = false;  // Provider::Dial before Connect, which takes the dialled socket
};

inline void PostRecvs(Endpoint* ep, const MemoryRegion& buf, int count, uint32_t size,
                      uint64_t base_id) {
  for (int i = 0; i < count; ++i) {
    RecvWork w;
    w.id = base_id + i;
    w.addr = buf.addr + static_cast<size_t>(i) * size;
    w.length = size;
    w.key = buf.key;
    Status s = ep->PostRecv(w);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
}

// Waits (spinning with a deadline) until the listener yields a request.
inline Result<std::unique_ptr<Endpoint>> WaitRequest(Listener* listener, int timeout_ms = 5000) {
  const uint64_t deadline = NowNs() + uint64_t(timeout_ms) * 1000000;
  for (;;) {
    pollfd pfd{listener->fd(), POLLIN, 0};
    poll(&pfd, 1, 10);
    Result<std::unique_ptr<Endpoint>> r = listener->GetRequest();
    if (r.ok() || !r.status().would_block() || NowNs() > deadline) return r;
  }
}

// Listens, connects a client from a helper thread, accepts; asserts everything worked.
inline void ConnectPair(Provider* provider, const PairOptions& opt, Pair* pair) {
  const uint16_t port = NextPort();
  sockaddr_in listen_addr = Ipv4(opt.listen_ip, port);
  auto listener = provider->Listen(Sa(listen_addr), sizeof(listen_addr), opt.attr);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  pair->listener = std::move(listener).value();
  auto client = provider->CreateEndpoint(opt.attr);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  pair->client = std::move(client).value();
  pair->recv_size = opt.recv_size;
  if (opt.client_recvs > 0) {
    auto buf = pair->client->AllocateBuffer(size_t(opt.client_recvs) * opt.recv_size);
    ASSERT_TRUE(buf.ok()) << buf.status().ToString();
    pair->client_buf = buf.value();
    PostRecvs(pair->client.get(), pair->client_buf, opt.client_recvs, opt.recv_size, 1000);
  }
  sockaddr_in connect_addr = Ipv4(opt.connect_ip, port);
  ConnectData data = opt.data;
  if (opt.dial_first) {
    Result<UniqueFd> dialed = provider->Dial(Sa(connect_addr), sizeof(connect_addr));
    ASSERT_TRUE(dialed.ok()) << dialed.status().ToString();
    data.dialed_fd = dialed.value().release();
  }
  Status connect_status;
  std::thread t([&] {
    connect_status = pair->client->Connect(Sa(connect_addr), sizeof(connect_addr), data);
  });
  auto server = WaitRequest(pair->listener.get());
  if (server.ok()) {
    pair->server = std::move(server).value();
    if (opt.server_recvs > 0) {
      auto buf = pair->server->AllocateBuffer(size_t(opt.server_recvs) * opt.recv_size);
      EXPECT_TRUE(buf.ok());
      pair->server_buf = buf.value();
      PostRecvs(pair->server.get(), pair->server_buf, opt.server_recvs, opt.recv_size, 2000);
    }
    Status s = pair->server->Accept();
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  t.join();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  ASSERT_TRUE(connect_status.ok()) << connect_status.ToString();
}

// Polls until `n` completions arrived or the deadline passed.
inline std::vector<Completion> WaitCompletions(Endpoint* ep, size_t n, int timeout_ms = 5000) {
  std::vector<Completion> got;
  const uint64_t deadline = NowNs() + uint64_t(timeout_ms) * 1000000;
  Completion c[16];
  while (got.size() < n && NowNs() < deadline) {
    int k = ep->Poll(c, static_cast<int>(std::min<size_t>(16, n - got.size())));
    got.insert(got.end(), c, c + k);
    if (k == 0) std::this_thread::yield();
  }
  return got;
}

inline SendWork OneSegment(uint64_t id, uint32_t imm, const void* data, uint32_t length) {
  SendWork w;
  w.id = id;
  w.imm = imm;
  w.num_segments = 1;
  w.segments[0] = Segment{data, length, 0};
  return w;
}

}  // namespace san::fabric::testing
