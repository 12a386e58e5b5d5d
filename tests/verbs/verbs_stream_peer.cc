// A separate process for verbs_stream_test's peer-death cases: connects a proto::Stream over the
// verbs provider to IP:PORT, sends "hello", then waits to be killed (SIGKILL: no orderly close,
// the kernel's cleanup of its rdma_cm ids is what the other side sees). With "drain" it reads
// (and drops) everything that arrives meanwhile, sleeping on the doorbell between reads, so the
// other side can be sending when the kill comes.
// Usage: verbs_stream_peer IP PORT [drain]. Exit 2 on any set-up failure.
#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "sanlib/fabric/registry.h"
#include "sanlib/proto/stream.h"

int main(int argc, char** argv) {
  using namespace san;
  if (argc != 3 && !(argc == 4 && std::string(argv[3]) == "drain")) return 2;
  const bool drain = argc == 4;
  fabric::Provider* provider = fabric::GetProvider("verbs");
  if (provider == nullptr) {
    std::fprintf(stderr, "verbs_stream_peer: %s\n", fabric::WhyUnavailable("verbs"));
    return 2;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(argv[2])));
  if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) return 2;
  proto::StreamParams params;
  auto ep = provider->CreateEndpoint(proto::Stream::EndpointAttrFor(params));
  if (!ep.ok()) return 2;
  auto stream = proto::Stream::Create(std::move(ep).value(), provider->capabilities(), params);
  if (!stream.ok()) return 2;
  Status s =
      stream.value()->endpoint().Connect(reinterpret_cast<sockaddr*>(&addr), sizeof addr, {});
  if (!s.ok()) {
    std::fprintf(stderr, "verbs_stream_peer: %s\n", s.ToString().c_str());
    return 2;
  }
  if (!stream.value()->Start().ok()) return 2;
  const iovec hello{const_cast<char*>("hello"), 5};
  // The window opens when the server's WAKEUP arrives: until then Send says EAGAIN.
  Result<size_t> sent = stream.value()->Send(&hello, 1);
  for (int i = 0; i < 3000 && !sent.ok() && sent.status().would_block(); ++i) {
    stream.value()->Progress();
    fabric::Endpoint& ep = stream.value()->endpoint();
    if (ep.Arm()) {
      pollfd p{ep.notify_fd(), POLLIN, 0};
      poll(&p, 1, 10);
      ep.ClearNotify();
    }
    sent = stream.value()->Send(&hello, 1);
  }
  if (!sent.ok() || !stream.value()->Flush().ok()) {
    std::fprintf(stderr, "verbs_stream_peer: send: %s\n", sent.status().ToString().c_str());
    return 2;
  }
  std::fprintf(stderr, "verbs_stream_peer: connected, sent %zu bytes\n", sent.value());
  std::vector<char> sink(1 << 20);
  for (;;) {  // keep the connection alive until killed
    if (!drain) {
      stream.value()->Progress();
      sleep(1);
      continue;
    }
    const iovec in{sink.data(), sink.size()};
    Result<size_t> r = stream.value()->Recv(&in, 1, false);
    if (r.ok() && r.value() > 0) continue;
    if (!r.ok() && !r.status().would_block()) return 1;
    fabric::Endpoint& ep = stream.value()->endpoint();
    if (ep.Arm()) {
      pollfd p{ep.notify_fd(), POLLIN, 0};
      poll(&p, 1, 100);
      ep.ClearNotify();
    }
  }
}
