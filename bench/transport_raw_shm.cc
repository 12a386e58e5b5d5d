// The raw shm provider, driven directly through fabric/provider.h: the "native VIA" line of
// SOVIA's graphs, i.e. what the hardware-like layer under sanlib can do with no socket semantics
// on top. The difference between this line and sanlib's is the socket layer's own cost.
//
// Messages are typed by their 32-bit immediate (type << 24 | value). Pre-posting is respected the
// way a VIA application would: the server posts its receives before Accept (sized from the setup
// carried in the ConnectData), the latency client never has more than one message in flight, and
// the bandwidth sender spends credits that the receiver returns (a kCredit message every quarter
// of its receive queue, the rest with its report).
//
// Waiting: kSpin polls in a loop; kBlock follows the doorbell protocol of provider.h (Poll, then
// Arm, then poll(notify_fd), then ClearNotify).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "sanlib/common/clock.h"
#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/provider.h"
#include "sanlib/fabric/registry.h"
#include "transport.h"

namespace san::bench {
namespace {

using fabric::Completion;
using fabric::Endpoint;
using fabric::EndpointAttr;
using fabric::MemoryRegion;
using fabric::Op;
using fabric::RecvWork;
using fabric::SendWork;

enum MessageType : uint32_t { kData = 1, kPhase = 2, kCredit = 3, kReport = 4, kEnd = 5 };

uint32_t Imm(MessageType type, uint32_t value = 0) { return type << 24 | (value & 0xffffff); }
uint32_t TypeOf(uint32_t imm) { return imm >> 24; }
uint32_t ValueOf(uint32_t imm) { return imm & 0xffffff; }

SendWork OneSegment(uint64_t id, uint32_t imm, const void* data, uint32_t length) {
  SendWork w;
  w.id = id;
  w.imm = imm;
  w.num_segments = 1;
  w.segments[0] = fabric::Segment{data, length, 0};
  return w;
}

// Control messages carry everything in their immediate; their one segment is empty.
SendWork Control(uint32_t imm) {
  static const char kNothing = 0;
  return OneSegment(0, imm, &kNothing, 0);
}

uint32_t Align64(uint64_t n) { return static_cast<uint32_t>((n + 63) & ~uint64_t{63}); }

// The receives one side keeps posted: `count` slots of `bytes` each, slot i at i * bytes.
struct Slots {
  uint32_t count = 0;
  uint32_t bytes = 0;
  size_t total() const { return size_t{count} * bytes; }
};

constexpr uint32_t kLatencySlots = 4;

Slots ServerSlots(const Setup& s) {
  const uint32_t bytes = Align64(std::max<uint32_t>(s.size, 64));
  if (s.kind == Kind::kLatency) return {kLatencySlots, bytes};
  // Deep enough that the sender rarely waits for credit; about 4 MiB, like a socket buffer.
  return {std::clamp<uint32_t>((4u << 20) / bytes, 16, 256), bytes};
}

Slots ClientSlots(const Setup& s) {
  if (s.kind == Kind::kLatency) return {kLatencySlots, Align64(std::max<uint32_t>(s.size, 64))};
  return {64, 64};  // credits and reports
}

EndpointAttr ClientAttr(const Setup& s) {
  EndpointAttr attr;
  attr.recv_depth = ClientSlots(s).count;
  attr.send_depth = 512;
  // The client's buffer_bytes sizes both arenas of the segment (docs/fabric.md).
  attr.buffer_bytes = std::max(ServerSlots(s).total(), ClientSlots(s).total()) + 4096;
  return attr;
}

EndpointAttr ListenerAttr() {
  EndpointAttr attr;
  attr.recv_depth = 512;
  attr.send_depth = 512;
  attr.buffer_bytes = 1u << 30;  // a cap: the budget is what the client's segment provides
  return attr;
}

// One endpoint's completions: receives come out in order through Next; send completions are
// reaped on the way (they carry nothing but errors). Receives seen while reaping for a full send
// queue are kept for Next, so none is lost.
class CompletionQueue {
 public:
  CompletionQueue(Endpoint* ep, Mode mode) : ep_(ep), mode_(mode) {}

  // The next receive completion (error completions included: the caller decides). With `wait`,
  // spins or sleeps until there is one; without, returns false when there is none now.
  Result<bool> Next(Completion* out, bool wait) {
    uint32_t empty_polls = 0;
    for (;;) {
      if (head_ != tail_) {
        *out = ring_[head_++ % kRing];
        return true;
      }
      if (Status st = Reap(); !st.ok()) return st;
      if (head_ != tail_) continue;
      if (!wait) return false;
      if (mode_ == Mode::kSpin) {
        if (++empty_polls % 4096 == 0 && ep_->broken()) {
          return Status(ECONNRESET, "raw-shm: connection broken");
        }
        // The CPU hint sanlib's own spin loops give (stream.cc): without it this loop polls the
        // peer's ring lines so hard that the line ping-pong between two SMT siblings costs
        // ~270 ns instead of ~50, and raw-shm ran slower than sanlib at small sizes.
        CpuRelax();
        continue;
      }
      if (ep_->broken()) return Status(ECONNRESET, "raw-shm: connection broken");
      if (ep_->Arm()) {
        pollfd pfd{ep_->notify_fd(), POLLIN, 0};
        if (poll(&pfd, 1, -1) < 0 && errno != EINTR) return Status::FromErrno("poll(notify_fd)");
        ep_->ClearNotify();
      }
    }
  }

  // PostSend, reaping and retrying while the send queue is full.
  Status Send(const SendWork& work) {
    for (;;) {
      Status st = ep_->PostSend(work);
      if (!st.would_block()) return st;
      if (Status r = Reap(); !r.ok()) return r;
    }
  }

 private:
  static constexpr uint32_t kRing = 1024;  // > the 512 receives that can ever be outstanding

  Status Reap() {
    Completion c[64];
    const int n = ep_->Poll(c, 64);
    for (int i = 0; i < n; ++i) {
      if (c[i].op == Op::kSend) {
        if (c[i].error != 0) return Status(c[i].error, "raw-shm: send completion");
        continue;
      }
      ring_[tail_++ % kRing] = c[i];
    }
    return Status::Ok();
  }

  Endpoint* const ep_;
  const Mode mode_;
  Completion ring_[kRing];
  uint64_t head_ = 0, tail_ = 0;
};

// Posted receive buffers for one side.
class RecvSlots {
 public:
  Status Init(Endpoint* ep, const Slots& slots) {
    ep_ = ep;
    slots_ = slots;
    Result<MemoryRegion> region = ep->AllocateBuffer(slots.total());
    if (!region.ok()) return region.status();
    region_ = region.value();
    for (uint32_t i = 0; i < slots.count; ++i) {
      if (Status st = Repost(i); !st.ok()) return st;
    }
    return Status::Ok();
  }
  Status Repost(uint64_t id) {
    RecvWork w;
    w.id = id;
    w.addr = At(id);
    w.length = slots_.bytes;
    w.key = region_.key;
    return ep_->PostRecv(w);
  }
  std::byte* At(uint64_t id) const { return region_.addr + id * slots_.bytes; }
  const Slots& slots() const { return slots_; }

 private:
  Endpoint* ep_ = nullptr;
  Slots slots_;
  MemoryRegion region_;
};

Status CheckRecv(const Completion& c, MessageType want, uint32_t length) {
  if (c.error != 0) return Status(c.error, "raw-shm: receive completion");
  if (TypeOf(c.imm) != want) return Status(EPROTO, "raw-shm: unexpected message type");
  if (c.length != length) return Status(EPROTO, "raw-shm: unexpected message length");
  return Status::Ok();
}

// ---- client ----

class RawConnection : public Connection {
 public:
  RawConnection(std::unique_ptr<Endpoint> ep, const Setup& setup, Mode mode)
      : ep_(std::move(ep)), setup_(setup), queue_(ep_.get(), mode), pattern_(setup.size) {}

  Status Open(const std::string& address) {
    if (Status st = recv_.Init(ep_.get(), ClientSlots(setup_)); !st.ok()) return st;
    ConnectionSetup wire;
    wire.kind = static_cast<uint8_t>(setup_.kind);
    wire.size = setup_.size;
    fabric::ConnectData data;
    data.length = sizeof wire;
    std::memcpy(data.bytes, &wire, sizeof wire);
    const sockaddr_in sin = Loopback(static_cast<uint16_t>(std::stoi(address)));
    Status st = ep_->Connect(reinterpret_cast<const sockaddr*>(&sin), sizeof sin, data);
    if (!st.ok()) return st;
    connected_ = true;
    credits_ = ServerSlots(setup_).count;
    return Status::Ok();
  }

  ~RawConnection() override {
    // Tell the server this connection is done; it has receives posted between phases.
    if (connected_ && setup_.kind != Kind::kQuit && credits_ > 0) {
      queue_.Send(Control(Imm(kEnd)));
    }
  }

  Status PingPong(uint64_t count, PingPongResult* out) override {
    const uint32_t size = setup_.size;
    std::vector<std::byte> message(pattern_.At(0), pattern_.At(0) + size);
    out->rtt_samples_ns.clear();
    out->rtt_samples_ns.reserve(count / PingPongResult::kSampleEvery + 1);
    PhaseHeader header;
    header.count = count;
    if (Status st = queue_.Send(OneSegment(0, Imm(kPhase), &header, sizeof header)); !st.ok()) {
      return st;
    }
    const uint64_t start = NowNs();
    for (uint64_t i = 0; i < count; ++i) {
      const bool sample = i % PingPongResult::kSampleEvery == 0;
      const uint64_t t0 = sample ? NowNs() : 0;
      WriteStamp(message.data(), size, i);
      if (Status st = queue_.Send(OneSegment(i, Imm(kData), message.data(), size)); !st.ok()) {
        return st;
      }
      Completion c;
      Result<bool> got = queue_.Next(&c, true);
      if (!got.ok()) return got.status();
      if (Status st = CheckRecv(c, kData, size); !st.ok()) return st;
      const std::byte* reply = recv_.At(c.id);
      if (!StampMatches(reply, size, i) ||
          (i % 64 == 0 && std::memcmp(reply, message.data(), size) != 0)) {
        fprintf(stderr, "san-bench: raw-shm echo %llu of %u bytes does not match what was sent\n",
                static_cast<unsigned long long>(i), size);
        return Status(EBADMSG, "ping-pong: echo differs from the message sent");
      }
      if (Status st = recv_.Repost(c.id); !st.ok()) return st;
      if (sample) out->rtt_samples_ns.push_back(static_cast<uint32_t>(NowNs() - t0));
    }
    out->elapsed_ns = NowNs() - start;
    return Status::Ok();
  }

  Status Stream(uint64_t count, StreamResult* out) override {
    const uint32_t size = setup_.size;
    PhaseHeader header;
    header.count = count;
    have_report_ = false;
    const uint64_t start = NowNs();
    if (Status st = SpendCredit(); !st.ok()) return st;
    if (Status st = queue_.Send(OneSegment(0, Imm(kPhase), &header, sizeof header)); !st.ok()) {
      return st;
    }
    uint64_t offset = 0;
    for (uint64_t k = 0; k < count; ++k) {
      if (Status st = SpendCredit(); !st.ok()) return st;
      Status st = queue_.Send(OneSegment(k, Imm(kData), pattern_.At(offset), size));
      if (!st.ok()) return st;
      offset += size;
    }
    while (!have_report_) {
      if (Status st = HandleControl(true); !st.ok()) return st;
    }
    out->report = report_;
    out->sender_elapsed_ns = NowNs() - start;
    return Status::Ok();
  }

 private:
  // Waits for credit if there is none, then takes one.
  Status SpendCredit() {
    while (credits_ == 0) {
      if (Status st = HandleControl(true); !st.ok()) return st;
    }
    --credits_;
    return Status::Ok();
  }

  // One credit or report message from the receiver.
  Status HandleControl(bool wait) {
    Completion c;
    Result<bool> got = queue_.Next(&c, wait);
    if (!got.ok()) return got.status();
    if (!got.value()) return Status::Ok();
    if (c.error != 0) return Status(c.error, "raw-shm: receive completion");
    if (TypeOf(c.imm) == kCredit) {
      credits_ += ValueOf(c.imm);
    } else if (TypeOf(c.imm) == kReport && c.length == sizeof report_) {
      std::memcpy(&report_, recv_.At(c.id), sizeof report_);
      credits_ += static_cast<uint32_t>(report_.credits);
      have_report_ = true;
    } else {
      return Status(EPROTO, "raw-shm: unexpected message from the receiver");
    }
    return recv_.Repost(c.id);
  }

  std::unique_ptr<Endpoint> ep_;
  const Setup setup_;
  CompletionQueue queue_;
  RecvSlots recv_;
  const Pattern pattern_;
  bool connected_ = false;
  uint32_t credits_ = 0;  // receives the server has posted that we have not used (bandwidth)
  bool have_report_ = false;
  SinkReport report_;
};

// ---- server ----

class RawServer {
 public:
  RawServer(Endpoint* ep, const Setup& setup, Mode mode)
      : ep_(ep), setup_(setup), queue_(ep, mode), pattern_(setup.size) {}

  Status Start() {
    if (Status st = recv_.Init(ep_, ServerSlots(setup_)); !st.ok()) return st;
    return ep_->Accept();
  }

  // Serves phases until the client ends the connection.
  Status Run() {
    for (;;) {
      Completion c;
      Result<bool> got = queue_.Next(&c, true);
      if (!got.ok()) return got.status().code() == ECONNRESET ? Status::Ok() : got.status();
      if (c.error == ECONNRESET) return Status::Ok();  // the client went away between phases
      if (c.error == 0 && TypeOf(c.imm) == kEnd) return Status::Ok();
      if (Status st = CheckRecv(c, kPhase, sizeof(PhaseHeader)); !st.ok()) return st;
      PhaseHeader header;
      std::memcpy(&header, recv_.At(c.id), sizeof header);
      if (header.magic != kPhaseMagic) return Status(EPROTO, "phase: bad magic");
      if (Status st = recv_.Repost(c.id); !st.ok()) return st;
      Status st = setup_.kind == Kind::kLatency ? Echo(header.count) : Sink(header.count);
      if (!st.ok()) return st;
    }
  }

 private:
  Status Echo(uint64_t count) {
    for (uint64_t i = 0; i < count; ++i) {
      Completion c;
      Result<bool> got = queue_.Next(&c, true);
      if (!got.ok()) return got.status();
      if (Status st = CheckRecv(c, kData, setup_.size); !st.ok()) return st;
      // Echo straight out of the receive buffer: the send copies before PostSend returns.
      Status st = queue_.Send(OneSegment(i, Imm(kData), recv_.At(c.id), c.length));
      if (!st.ok()) return st;
      if (Status r = recv_.Repost(c.id); !r.ok()) return r;
    }
    return Status::Ok();
  }

  Status Sink(uint64_t count) {
    const uint32_t credit_every = std::max<uint32_t>(1, recv_.slots().count / 4);
    uint32_t to_credit = 1;  // the phase header's receive, re-posted
    SinkReport report;
    uint64_t first_ns = 0, bytes = 0;
    for (uint64_t k = 0; k < count; ++k) {
      Completion c;
      Result<bool> got = queue_.Next(&c, true);
      if (!got.ok()) return got.status();
      if (Status st = CheckRecv(c, kData, setup_.size); !st.ok()) return st;
      if (k == 0) {
        first_ns = NowNs();
      } else {
        bytes += c.length;
      }
      if ((k % 64 == 0 || k + 1 == count) &&
          !pattern_.Matches(k * setup_.size, recv_.At(c.id), c.length)) {
        if (report.errors++ == 0) {
          fprintf(stderr, "san-bench: raw-shm message %llu does not match what was sent\n",
                  static_cast<unsigned long long>(k));
        }
      }
      if (Status st = recv_.Repost(c.id); !st.ok()) return st;
      if (++to_credit >= credit_every) {
        Status st = queue_.Send(Control(Imm(kCredit, to_credit)));
        if (!st.ok()) return st;
        to_credit = 0;
      }
    }
    report.elapsed_ns = NowNs() - first_ns;
    report.bytes = bytes;
    report.credits = to_credit;
    return queue_.Send(OneSegment(0, Imm(kReport), &report, sizeof report));
  }

  Endpoint* const ep_;
  const Setup setup_;
  CompletionQueue queue_;
  RecvSlots recv_;
  const Pattern pattern_;
};

class RawShmTransport : public Transport {
 public:
  explicit RawShmTransport(Mode mode) : mode_(mode), provider_(fabric::GetProvider("shm")) {}

  Result<std::string> Listen() override {
    if (!provider_) return Status(ENODEV, "shm provider unavailable");
    // A port the kernel handed out to a bound TCP socket that we keep: no sanlib listener (which
    // binds its TCP socket first) can take the same rendezvous name while we hold it.
    for (int attempt = 0; attempt < 10; ++attempt) {
      UniqueFd reserve(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
      sockaddr_in sin = Loopback(0);
      socklen_t len = sizeof sin;
      if (!reserve.valid() || bind(reserve.get(), reinterpret_cast<sockaddr*>(&sin), len) != 0 ||
          getsockname(reserve.get(), reinterpret_cast<sockaddr*>(&sin), &len) != 0) {
        return Status::FromErrno("bind(port reservation)");
      }
      auto listener =
          provider_->Listen(reinterpret_cast<const sockaddr*>(&sin), sizeof sin, ListenerAttr());
      if (listener.ok()) {
        listener_ = std::move(listener).value();
        port_reservation_ = std::move(reserve);
        return std::to_string(ntohs(sin.sin_port));
      }
      if (listener.status().code() != EADDRINUSE) return listener.status();
    }
    return Status(EADDRINUSE, "shm Listen");
  }

  Result<bool> Serve() override {
    Result<std::unique_ptr<Endpoint>> request = listener_->GetRequest();
    while (!request.ok()) {
      if (!request.status().would_block()) return request.status();
      pollfd pfd{listener_->fd(), POLLIN, 0};
      if (poll(&pfd, 1, -1) < 0 && errno != EINTR) return Status::FromErrno("poll(listener)");
      request = listener_->GetRequest();
    }
    std::unique_ptr<Endpoint> ep = std::move(request).value();
    const fabric::ConnectData& data = ep->peer_data();
    ConnectionSetup wire;
    if (data.length != sizeof wire) return Status(EPROTO, "setup: bad length");
    std::memcpy(&wire, data.bytes, sizeof wire);
    if (wire.magic != kSetupMagic) return Status(EPROTO, "setup: bad magic");
    const Setup setup{static_cast<Kind>(wire.kind), wire.size, false};
    if (setup.kind == Kind::kQuit) {
      ep->Accept();
      return false;
    }
    if (setup.kind != Kind::kLatency && setup.kind != Kind::kBandwidth) {
      return Status(EPROTO, "setup: bad kind");
    }
    RawServer server(ep.get(), setup, mode_);
    if (Status st = server.Start(); !st.ok()) return st;
    if (Status st = server.Run(); !st.ok()) return st;
    return true;
  }

  Result<std::unique_ptr<Connection>> Connect(const std::string& address,
                                              const Setup& setup) override {
    if (!provider_) return Status(ENODEV, "shm provider unavailable");
    Result<std::unique_ptr<Endpoint>> ep = provider_->CreateEndpoint(ClientAttr(setup));
    if (!ep.ok()) return ep.status();
    auto connection = std::make_unique<RawConnection>(std::move(ep).value(), setup, mode_);
    if (Status st = connection->Open(address); !st.ok()) return st;
    return std::unique_ptr<Connection>(std::move(connection));
  }

 private:
  const Mode mode_;
  fabric::Provider* const provider_;
  std::unique_ptr<fabric::Listener> listener_;
  UniqueFd port_reservation_;
};

}  // namespace

std::unique_ptr<Transport> MakeRawShmTransport(Mode mode) {
  return std::make_unique<RawShmTransport>(mode);
}

}  // namespace san::bench
