#include "transport_socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

#include "sanlib/common/clock.h"

namespace san::bench {
namespace {

// How much a bandwidth receiver asks for per call: whole messages when they are large, a batch
// of small ones otherwise (as iperf and netperf read).
size_t SinkChunk(uint32_t size) { return std::max<size_t>(size, 256u << 10); }

}  // namespace

// ---- SocketIo ----

template <typename Calls>
Status SocketIo<Calls>::SendAll(const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    const ssize_t n = Calls::Send(fd_, p, len, flags_ | MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Status::FromErrno("send");
    }
  }
  return Status::Ok();
}

template <typename Calls>
Status SocketIo<Calls>::RecvAll(void* buf, size_t len, bool* eof) {
  char* p = static_cast<char*>(buf);
  size_t got = 0;
  if (eof) *eof = false;
  while (got < len) {
    const ssize_t n = Calls::Recv(fd_, p + got, len - got, flags_);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      if (got == 0 && eof) {
        *eof = true;
        return Status::Ok();
      }
      return Status(ECONNRESET, "recv: connection closed mid-message");
    } else if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Status::FromErrno("recv");
    }
  }
  return Status::Ok();
}

template <typename Calls>
Result<size_t> SocketIo<Calls>::RecvSome(void* buf, size_t len) {
  for (;;) {
    const ssize_t n = Calls::Recv(fd_, buf, len, flags_);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
      return Status::FromErrno("recv");
    }
  }
}

// ---- client ----

template <typename Calls>
SocketConnection<Calls>::SocketConnection(int fd, const Setup& setup, bool busy_poll, bool push)
    : fd_(fd), setup_(setup), busy_poll_(busy_poll), push_(push) {}

template <typename Calls>
SocketConnection<Calls>::~SocketConnection() {
  Calls::Close(fd_);
}

template <typename Calls>
Status SocketConnection<Calls>::PingPong(uint64_t count, PingPongResult* out) {
  SocketIo<Calls> io(fd_, busy_poll_);
  const size_t size = setup_.size;
  const Pattern pattern(size);
  std::vector<std::byte> message(pattern.At(0), pattern.At(0) + size);
  std::vector<std::byte> reply(size);
  out->rtt_samples_ns.clear();
  out->rtt_samples_ns.reserve(count / PingPongResult::kSampleEvery + 1);

  PhaseHeader header;
  header.count = count;
  if (Status st = io.SendAll(&header, sizeof header); !st.ok()) return st;
  const uint64_t start = NowNs();
  for (uint64_t i = 0; i < count; ++i) {
    const bool sample = i % PingPongResult::kSampleEvery == 0;
    const uint64_t t0 = sample ? NowNs() : 0;
    WriteStamp(message.data(), size, i);
    if (Status st = io.SendAll(message.data(), size); !st.ok()) return st;
    if (Status st = io.RecvAll(reply.data(), size); !st.ok()) return st;
    if (!StampMatches(reply.data(), size, i) ||
        (i % 64 == 0 && std::memcmp(reply.data(), message.data(), size) != 0)) {
      fprintf(stderr, "san-bench: echo %llu of %zu bytes does not match what was sent\n",
              static_cast<unsigned long long>(i), size);
      return Status(EBADMSG, "ping-pong: echo differs from the message sent");
    }
    if (sample) out->rtt_samples_ns.push_back(static_cast<uint32_t>(NowNs() - t0));
  }
  out->elapsed_ns = NowNs() - start;
  return Status::Ok();
}

template <typename Calls>
Status SocketConnection<Calls>::Stream(uint64_t count, StreamResult* out) {
  SocketIo<Calls> io(fd_, busy_poll_);
  const size_t size = setup_.size;
  const Pattern pattern(size);
  PhaseHeader header;
  header.count = count;
  const uint64_t start = NowNs();
  if (Status st = io.SendAll(&header, sizeof header); !st.ok()) return st;
  uint64_t offset = 0;
  for (uint64_t k = 0; k < count; ++k) {
    if (Status st = io.SendAll(pattern.At(offset), size); !st.ok()) return st;
    offset += size;
  }
  if (push_) {
    const int on = 1, off = 0;
    if (Calls::SetSockOpt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) != 0 ||
        Calls::SetSockOpt(fd_, IPPROTO_TCP, TCP_NODELAY, &off, sizeof off) != 0) {
      return Status::FromErrno("setsockopt(TCP_NODELAY push)");
    }
  }
  if (Status st = io.RecvAll(&out->report, sizeof out->report); !st.ok()) return st;
  out->sender_elapsed_ns = NowNs() - start;
  return Status::Ok();
}

// ---- server ----

namespace {

template <typename Calls>
Status Echo(SocketIo<Calls>& io, uint64_t count, std::vector<std::byte>& buf) {
  for (uint64_t i = 0; i < count; ++i) {
    if (Status st = io.RecvAll(buf.data(), buf.size()); !st.ok()) return st;
    if (Status st = io.SendAll(buf.data(), buf.size()); !st.ok()) return st;
  }
  return Status::Ok();
}

template <typename Calls>
Status Sink(SocketIo<Calls>& io, uint64_t count, uint32_t size, const Pattern& pattern,
            std::vector<std::byte>& buf) {
  SinkReport report;
  uint64_t remaining = count * size;
  uint64_t offset = 0, first_bytes = 0, first_ns = 0, chunks = 0;
  while (remaining > 0) {
    Result<size_t> n = io.RecvSome(buf.data(), std::min<uint64_t>(buf.size(), remaining));
    if (!n.ok()) return n.status();
    if (n.value() == 0) return Status(ECONNRESET, "recv: connection closed mid-phase");
    if (offset == 0) {
      first_ns = NowNs();
      first_bytes = n.value();
    }
    // Check a sample of the chunks (every 64th and the last) against the pattern.
    if ((chunks++ % 64 == 0 || n.value() == remaining) &&
        !pattern.Matches(offset, buf.data(), n.value())) {
      if (report.errors++ == 0) {
        fprintf(stderr, "san-bench: received bytes %llu..%llu do not match what was sent\n",
                static_cast<unsigned long long>(offset),
                static_cast<unsigned long long>(offset + n.value()));
      }
    }
    offset += n.value();
    remaining -= n.value();
  }
  report.elapsed_ns = NowNs() - first_ns;
  report.bytes = offset - first_bytes;
  return io.SendAll(&report, sizeof report);
}

}  // namespace

template <typename Calls>
SocketTransport<Calls>::~SocketTransport() {
  if (listen_fd_ >= 0) Calls::Close(listen_fd_);
}

template <typename Calls>
Result<std::string> SocketTransport<Calls>::Listen() {
  std::string address;
  Result<int> fd = OpenListener(&address);
  if (!fd.ok()) return fd.status();
  listen_fd_ = fd.value();
  return address;
}

template <typename Calls>
Result<bool> SocketTransport<Calls>::Serve() {
  int fd;
  do {
    fd = Calls::Accept(listen_fd_);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Status::FromErrno("accept");
  struct Closer {
    int fd;
    ~Closer() { Calls::Close(fd); }
  } closer{fd};

  SocketIo<Calls> io(fd, busy_poll_);
  ConnectionSetup wire;
  bool eof = false;
  if (Status st = io.RecvAll(&wire, sizeof wire, &eof); !st.ok()) return st;
  if (eof) return true;  // a client that gave up before its setup: not ours to judge
  if (wire.magic != kSetupMagic) return Status(EPROTO, "setup: bad magic");
  const Setup setup{static_cast<Kind>(wire.kind), wire.size, wire.nodelay != 0};
  if (setup.kind == Kind::kQuit) return false;
  if (setup.kind != Kind::kLatency && setup.kind != Kind::kBandwidth) {
    return Status(EPROTO, "setup: bad kind");
  }
  if (Status st = ConfigureAccepted(fd, setup); !st.ok()) return st;

  const bool latency = setup.kind == Kind::kLatency;
  std::vector<std::byte> buf(latency ? setup.size : SinkChunk(setup.size));
  const Pattern pattern(latency ? 0 : buf.size());
  for (;;) {
    PhaseHeader header;
    if (Status st = io.RecvAll(&header, sizeof header, &eof); !st.ok()) return st;
    if (eof) return true;
    if (header.magic != kPhaseMagic) return Status(EPROTO, "phase: bad magic");
    Status st =
        latency ? Echo(io, header.count, buf) : Sink(io, header.count, setup.size, pattern, buf);
    if (!st.ok()) return st;
  }
}

template <typename Calls>
Result<std::unique_ptr<Connection>> SocketTransport<Calls>::Connect(const std::string& address,
                                                                    const Setup& setup) {
  Result<int> fd = OpenClient(address, setup);
  if (!fd.ok()) return fd.status();
  const bool push = setup.kind == Kind::kBandwidth && !setup.nodelay && HasNoDelay();
  auto connection = std::make_unique<SocketConnection<Calls>>(fd.value(), setup, busy_poll_, push);
  ConnectionSetup wire;
  wire.kind = static_cast<uint8_t>(setup.kind);
  wire.nodelay = setup.nodelay ? 1 : 0;
  wire.size = setup.size;
  SocketIo<Calls> io(fd.value(), busy_poll_);
  if (Status st = io.SendAll(&wire, sizeof wire); !st.ok()) return st;
  if (setup.kind == Kind::kQuit) {
    // Stay until the server has taken the quit and closed, so that the server never has to
    // accept a connection whose client has already exited (sanlib lost such a client's bytes
    // before dff14e5; the kernel keeps them).
    char byte;
    while (true) {
      Result<size_t> n = io.RecvSome(&byte, 1);
      if (!n.ok() || n.value() == 0) break;
    }
  }
  return std::unique_ptr<Connection>(std::move(connection));
}

template class SocketIo<KernelCalls>;
template class SocketIo<SanCalls>;
template class SocketConnection<KernelCalls>;
template class SocketConnection<SanCalls>;
template class SocketTransport<KernelCalls>;
template class SocketTransport<SanCalls>;

}  // namespace san::bench
