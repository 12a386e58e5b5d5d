// san-verbs-bench: latency and bandwidth over the verbs provider, in two processes (server and
// client, possibly on two hosts), printed beside nothing: the guest harness runs ib_send_lat and
// ib_write_bw on the same device right after it, for the raw fabric's figures.
//
//   raw     the verbs provider driven directly (the "native VIA" line): 64-byte ping-pong; then
//           (client) what registering application memory costs (RegisterSendMemory +
//           DeregisterSendMemory, the zero-copy send's price per call) beside the memcpy into a
//           staging slot it saves, at 64 KiB .. 1 MiB
//   stream  proto::Stream, the protocol every SAN socket runs, over verbs: 64-byte ping-pong
//           (combining off, as TCP_NODELAY) and a one-way stream of 64 KiB writes whose bytes the
//           receiver checks
// Every wait sleeps on the doorbell after one poll (no busy-polling: emulated RDMA needs the CPU).
// Numbers under emulation (Soft-RoCE in TCG) are functional evidence, not RDMA performance.
//
// Usage: san-verbs-bench --server IP --port P | --client IP --port P [--iters N] [--mib M]
// Uses ports P (raw) and P+1 (stream). Exit 0 when every phase completed and every byte matched.
#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "sanlib/common/clock.h"
#include "sanlib/fabric/registry.h"
#include "sanlib/proto/stream.h"

namespace {

using namespace san;

constexpr uint64_t kTimeoutNs = 120'000'000'000ull;

void Sleep(fabric::Endpoint& ep) {
  if (ep.Arm()) {
    pollfd p{ep.notify_fd(), POLLIN, 0};
    poll(&p, 1, 100);
    ep.ClearNotify();
  }
}

uint8_t PatternByte(uint64_t i) { return static_cast<uint8_t>((i * 2654435761u + 99) >> 7); }

struct Args {
  bool server = false;
  std::string ip;
  uint16_t port = 0;
  int iters = 1000;
  uint64_t mib = 16;
};

sockaddr_in Addr(const Args& a, int offset) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(a.port + offset));
  inet_pton(AF_INET, a.ip.c_str(), &sin.sin_addr);
  return sin;
}

// One endpoint of a connection: server waits for the request, client connects (retrying while
// the server is not listening yet).
Result<std::unique_ptr<fabric::Endpoint>> Open(
    fabric::Provider& p, const Args& a, int offset, const fabric::EndpointAttr& attr,
    const std::function<Status(fabric::Endpoint&)>& prepare) {
  sockaddr_in sin = Addr(a, offset);
  if (a.server) {
    auto l = p.Listen(reinterpret_cast<sockaddr*>(&sin), sizeof sin, attr);
    if (!l.ok()) return l.status();
    std::fprintf(stderr, "san-verbs-bench: listening on %s:%d\n", a.ip.c_str(), a.port + offset);
    const uint64_t deadline = NowNs() + kTimeoutNs;
    for (;;) {
      auto r = l.value()->GetRequest();
      if (r.ok()) {
        Status s = prepare(*r.value());
        if (s.ok()) s = r.value()->Accept();
        if (!s.ok()) return s;
        return r;
      }
      if (!r.status().would_block() || NowNs() > deadline) return r.status();
      pollfd pf{l.value()->fd(), POLLIN, 0};
      poll(&pf, 1, 100);
    }
  }
  Status last;
  for (int attempt = 0; attempt < 50; ++attempt) {
    auto ep = p.CreateEndpoint(attr);
    if (!ep.ok()) return ep.status();
    Status s = prepare(*ep.value());
    if (s.ok()) s = ep.value()->Connect(reinterpret_cast<sockaddr*>(&sin), sizeof sin, {});
    if (s.ok()) return ep;
    last = s;
    if (s.code() != ECONNREFUSED) break;
    usleep(200000);
  }
  return last;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The zero-copy send's trade (docs/protocol.md "Large messages over verbs"): one registration
// and deregistration of the application's buffer per call, against the copy into the staging
// slot it saves. Medians of 15, warm buffers (an application's buffer is usually touched).
void RegistrationCost(fabric::Endpoint& e) {
  if (!(fabric::GetProvider("verbs")->capabilities() & fabric::kCapRegisteredSend)) {
    std::printf("SAN-BENCH reg-cost: no kCapRegisteredSend here\n");
    return;
  }
  for (size_t size : {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20}) {
    std::vector<uint8_t> app(size, 1), staging(size, 2);
    std::vector<double> reg, copy;
    for (int i = 0; i < 15; ++i) {
      uint64_t t0 = NowNs();
      Result<fabric::MemoryRegion> r = e.RegisterSendMemory(app.data(), size);
      if (!r.ok()) {
        std::printf("SAN-BENCH reg-cost: %s\n", r.status().ToString().c_str());
        return;
      }
      e.DeregisterSendMemory(r.value());
      reg.push_back(double(NowNs() - t0) / 1000.0);
      app[i] = static_cast<uint8_t>(i);
      t0 = NowNs();
      std::memcpy(staging.data(), app.data(), size);
      copy.push_back(double(NowNs() - t0) / 1000.0);
    }
    std::printf(
        "SAN-BENCH reg-cost %zu KiB: register+deregister median %.1f us, memcpy median "
        "%.1f us (checksum %u)\n",
        size >> 10, Median(reg), Median(copy), unsigned(staging[size / 2] + staging[3]));
  }
}

int RawPingPong(fabric::Provider& p, const Args& a) {
  fabric::EndpointAttr attr;
  attr.recv_depth = 16;
  attr.send_depth = 16;
  attr.buffer_bytes = 16 * 4096;
  fabric::MemoryRegion buf;
  auto prepare = [&](fabric::Endpoint& ep) -> Status {
    auto b = ep.AllocateBuffer(16 * 4096);
    if (!b.ok()) return b.status();
    buf = b.value();
    for (int i = 0; i < 16; ++i) {
      Status s = ep.PostRecv(fabric::RecvWork{uint64_t(i), buf.addr + i * 4096, 4096, buf.key});
      if (!s.ok()) return s;
    }
    return Status::Ok();
  };
  auto ep = Open(p, a, 0, attr, prepare);
  if (!ep.ok()) {
    std::fprintf(stderr, "raw: %s\n", ep.status().ToString().c_str());
    return 1;
  }
  fabric::Endpoint& e = *ep.value();
  char msg[64] = "ping";
  std::vector<double> rtt;
  const uint64_t deadline = NowNs() + kTimeoutNs;
  // Waits for the next receive (reaping send completions on the way) and reposts its buffer.
  auto await_recv = [&]() -> bool {
    fabric::Completion c[8];
    for (;;) {
      const int n = e.Poll(c, 8);
      for (int i = 0; i < n; ++i) {
        if (c[i].error != 0) return false;
        if (c[i].op == fabric::Op::kRecv) {
          const uint64_t slot = c[i].id % 16;
          return e.PostRecv(fabric::RecvWork{c[i].id + 16, buf.addr + slot * 4096, 4096, buf.key})
              .ok();
        }
      }
      if (NowNs() > deadline) return false;
      if (n == 0) Sleep(e);
    }
  };
  for (int i = 0; i < a.iters; ++i) {
    fabric::SendWork w;
    w.id = uint64_t(i);
    w.imm = uint32_t(i);
    w.num_segments = 1;
    w.segments[0] = fabric::Segment{msg, sizeof msg, 0};
    const uint64_t t0 = NowNs();
    if (a.server) {
      if (!await_recv() || !e.PostSend(w).ok()) return 1;
    } else {
      if (!e.PostSend(w).ok() || !await_recv()) return 1;
      rtt.push_back(double(NowNs() - t0) / 2000.0);
    }
  }
  // An orderly end: the client's last message is acknowledged by the server's NIC before either
  // side destroys its endpoint (a destroy is abortive: its DREQ may overtake data still in flight
  // between two hosts, and the peer then flushes it).
  if (a.server) {
    if (!await_recv()) return 1;
  } else {
    RegistrationCost(e);
    fabric::SendWork bye;
    bye.id = ~uint64_t{0};
    bye.num_segments = 1;
    bye.segments[0] = fabric::Segment{msg, 1, 0};
    if (!e.PostSend(bye).ok()) return 1;
    for (bool done = false; !done;) {
      fabric::Completion c[8];
      const int n = e.Poll(c, 8);
      for (int i = 0; i < n; ++i) {
        if (c[i].error != 0) return 1;
        done |= c[i].op == fabric::Op::kSend && c[i].id == bye.id;
      }
      if (NowNs() > deadline) return 1;
      if (n == 0) Sleep(e);
    }
  }
  if (!a.server) {
    std::printf("SAN-BENCH raw-verbs pingpong 64B: median one-way %.1f us over %d round trips\n",
                Median(rtt), a.iters);
  }
  return 0;
}

int StreamPhases(fabric::Provider& p, const Args& a) {
  proto::StreamParams params;
  params.combine.enabled = false;  // latency: as TCP_NODELAY
  std::unique_ptr<proto::Stream> stream;
  // Stream::Create takes the endpoint before Connect/Accept: do the set-up by hand.
  sockaddr_in sin = Addr(a, 1);
  const fabric::EndpointAttr attr = proto::Stream::EndpointAttrFor(params);
  const uint64_t deadline = NowNs() + kTimeoutNs;
  if (a.server) {
    auto l = p.Listen(reinterpret_cast<sockaddr*>(&sin), sizeof sin, attr);
    if (!l.ok()) {
      std::fprintf(stderr, "stream listen: %s\n", l.status().ToString().c_str());
      return 1;
    }
    for (;;) {
      auto r = l.value()->GetRequest();
      if (r.ok()) {
        auto s = proto::Stream::Create(std::move(r).value(), p.capabilities(), params);
        Status accepted = s.ok() ? s.value()->endpoint().Accept() : s.status();
        if (!accepted.ok()) {
          std::fprintf(stderr, "stream accept: %s\n", accepted.ToString().c_str());
          return 1;
        }
        stream = std::move(s).value();
        break;
      }
      if (!r.status().would_block() || NowNs() > deadline) return 1;
      pollfd pf{l.value()->fd(), POLLIN, 0};
      poll(&pf, 1, 100);
    }
  } else {
    for (int attempt = 0; attempt < 50 && !stream; ++attempt) {
      auto ep = p.CreateEndpoint(attr);
      if (!ep.ok()) return 1;
      auto s = proto::Stream::Create(std::move(ep).value(), p.capabilities(), params);
      if (!s.ok()) return 1;
      Status c = s.value()->endpoint().Connect(reinterpret_cast<sockaddr*>(&sin), sizeof sin, {});
      if (c.ok()) {
        stream = std::move(s).value();
      } else if (c.code() != ECONNREFUSED) {
        std::fprintf(stderr, "stream: %s\n", c.ToString().c_str());
        return 1;
      } else {
        usleep(200000);
      }
    }
    if (!stream) return 1;
  }
  proto::Stream& s = *stream;
  if (!s.Start().ok()) return 1;
  auto wait = [&] {
    s.Progress();
    Sleep(s.endpoint());
  };
  auto send_all = [&](const uint8_t* data, size_t n) -> bool {
    while (n > 0) {
      const iovec iov{const_cast<uint8_t*>(data), n};
      Result<size_t> r = s.Send(&iov, 1);
      if (r.ok()) {
        data += r.value();
        n -= r.value();
      } else if (!r.status().would_block() || NowNs() > deadline) {
        std::fprintf(stderr, "stream send: %s\n", r.status().ToString().c_str());
        return false;
      } else {
        wait();
      }
    }
    return s.Flush().ok();
  };
  auto recv_some = [&](uint8_t* data, size_t n) -> ssize_t {
    for (;;) {
      const iovec iov{data, n};
      Result<size_t> r = s.Recv(&iov, 1, false);
      if (r.ok()) return static_cast<ssize_t>(r.value());
      if (!r.status().would_block() || NowNs() > deadline) {
        std::fprintf(stderr, "stream recv: %s\n", r.status().ToString().c_str());
        return -1;
      }
      wait();
    }
  };
  auto recv_all = [&](uint8_t* data, size_t n) -> bool {
    while (n > 0) {
      const ssize_t k = recv_some(data, n);
      if (k <= 0) return false;
      data += k;
      n -= static_cast<size_t>(k);
    }
    return true;
  };
  // Ping-pong.
  uint8_t msg[64] = {};
  std::vector<double> rtt;
  for (int i = 0; i < a.iters; ++i) {
    const uint64_t t0 = NowNs();
    if (a.server) {
      if (!recv_all(msg, sizeof msg) || !send_all(msg, sizeof msg)) return 1;
    } else {
      if (!send_all(msg, sizeof msg) || !recv_all(msg, sizeof msg)) return 1;
      rtt.push_back(double(NowNs() - t0) / 2000.0);
    }
  }
  if (!a.server) {
    std::printf("SAN-BENCH stream-verbs pingpong 64B: median one-way %.1f us over %d round trips\n",
                Median(rtt), a.iters);
  }
  // One-way stream, client -> server, checked byte by byte at the server.
  const uint64_t total = a.mib << 20;
  std::vector<uint8_t> block(64 * 1024);
  if (a.server) {
    uint64_t got = 0, bad = 0;
    while (got < total) {
      const ssize_t k = recv_some(block.data(), std::min<uint64_t>(block.size(), total - got));
      if (k <= 0) return 1;
      for (ssize_t i = 0; i < k; ++i) bad += block[i] != PatternByte(got + i);
      got += static_cast<uint64_t>(k);
    }
    uint8_t verdict = bad == 0 ? 'Y' : 'N';
    if (!send_all(&verdict, 1)) return 1;
    std::printf("SAN-BENCH server received %llu bytes, %llu mismatches\n",
                static_cast<unsigned long long>(got), static_cast<unsigned long long>(bad));
    // Wait for the client's close so our FIN/ACKs are not cut short.
    uint8_t tail;
    recv_some(&tail, 1);
    return bad == 0 ? 0 : 1;
  }
  const uint64_t t0 = NowNs();
  for (uint64_t sent = 0; sent < total;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), total - sent));
    for (size_t i = 0; i < n; ++i) block[i] = PatternByte(sent + i);
    if (!send_all(block.data(), n)) return 1;
    sent += n;
  }
  uint8_t verdict = 0;
  if (!recv_all(&verdict, 1)) return 1;
  const double secs = double(NowNs() - t0) / 1e9;
  std::printf(
      "SAN-BENCH stream-verbs stream 64KiB writes: %.1f MB/s (%llu bytes in %.2f s, "
      "receiver check %s)\n",
      double(total) / 1e6 / secs, static_cast<unsigned long long>(total), secs,
      verdict == 'Y' ? "ok" : "FAILED");
  s.ShutdownWrite();
  for (int i = 0; i < 100 && !s.Finished(); ++i) wait();
  return verdict == 'Y' ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--server" || k == "--client") {
      a.server = k == "--server";
      a.ip = argv[i + 1];
    } else if (k == "--port") {
      a.port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    } else if (k == "--iters") {
      a.iters = std::max(1, std::atoi(argv[i + 1]));
    } else if (k == "--mib") {
      a.mib = static_cast<uint64_t>(std::max(1, std::atoi(argv[i + 1])));
    } else {
      std::fprintf(stderr, "san-verbs-bench: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (a.ip.empty() || a.port == 0) {
    std::fprintf(stderr,
                 "usage: san-verbs-bench --server IP --port P | --client IP --port P "
                 "[--iters N] [--mib M]\n");
    return 2;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  fabric::Provider* p = fabric::GetProvider("verbs");
  if (p == nullptr) {
    std::fprintf(stderr, "san-verbs-bench: %s\n", fabric::WhyUnavailable("verbs"));
    return 2;
  }
  if (RawPingPong(*p, a) != 0) {
    std::fprintf(stderr, "san-verbs-bench: raw phase failed\n");
    return 1;
  }
  if (StreamPhases(*p, a) != 0) {
    std::fprintf(stderr, "san-verbs-bench: stream phase failed\n");
    return 1;
  }
  return 0;
}
