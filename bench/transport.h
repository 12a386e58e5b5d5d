// The interface every benchmarked transport implements: raw shm provider, sanlib, kernel TCP and
// Unix stream sockets (transport_*.cc). The measurement schedule (measure.h) and the process
// orchestration (runner.h) are written once against it.
//
// One Transport object lives in each of the two benchmark processes: the server process calls
// Listen once and then Serve for each connection; the client process calls Connect once per
// measured point and drives phases on the Connection. Transports are single-threaded: nothing here
// is called from more than one thread.
//
// Mode says how a side waits when nothing has arrived: kSpin busy-polls (raw shm: Poll in a loop;
// kernel sockets: MSG_DONTWAIT in a loop; sanlib: its own spin, SAN_SPIN_US set large by the
// runner), kBlock sleeps (raw shm: Arm + poll(notify_fd); kernel sockets and sanlib: blocking
// calls with SAN_SPIN_US=0).
//
// Every loop checks what it receives (protocol.h): a mismatch is an error (EBADMSG), never a
// number. Errors carry the failing call in their Status; details go to stderr where they are found.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "protocol.h"
#include "sanlib/common/status.h"

namespace san::bench {

// The address every benchmarked connection lives on: 127.0.0.1 unless `--host` named another
// address of this host (e.g. an RDMA port's, for sanlib over verbs). Set once, in the
// coordinator, before the benchmark processes are forked.
void SetBenchAddress(in_addr address);
in_addr BenchAddress();

// BenchAddress():port (the name is from when it was always 127.0.0.1).
inline sockaddr_in Loopback(uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr = BenchAddress();
  return sin;
}

struct Setup {
  Kind kind = Kind::kLatency;
  uint32_t size = 0;
  bool nodelay = false;  // TCP_NODELAY (tcp: no Nagle; sanlib: no combining)
};

struct PingPongResult {
  uint64_t elapsed_ns = 0;               // all `count` round trips, timed by the client
  std::vector<uint32_t> rtt_samples_ns;  // round trip of every kSampleEvery-th iteration
  static constexpr uint64_t kSampleEvery = 16;
};

struct StreamResult {
  uint64_t sender_elapsed_ns = 0;  // header sent .. report received
  SinkReport report;               // what the receiver timed and counted
};

// The client end of one connection. Destroying it closes the connection.
class Connection {
 public:
  virtual ~Connection() = default;
  // `count` round trips of setup.size bytes; checks every echo's stamp and a sample in full.
  virtual Status PingPong(uint64_t count, PingPongResult* out) = 0;
  // `count` messages of setup.size bytes to the server, which times them and reports.
  virtual Status Stream(uint64_t count, StreamResult* out) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Server process: opens the listening end; returns the address the client connects to.
  virtual Result<std::string> Listen() = 0;
  // Server process: accepts one connection and serves its phases until the client closes it.
  // Returns false when that connection was the client's quit.
  virtual Result<bool> Serve() = 0;
  // Client process: a connection to `address` set up for `setup`.
  virtual Result<std::unique_ptr<Connection>> Connect(const std::string& address,
                                                      const Setup& setup) = 0;
};

// "raw-shm", "sanlib", "tcp", "unix"; nullptr for any other name.
std::unique_ptr<Transport> MakeTransport(std::string_view name, Mode mode);

// One factory per transport file.
std::unique_ptr<Transport> MakeRawShmTransport(Mode mode);
std::unique_ptr<Transport> MakeSanlibTransport(Mode mode);
std::unique_ptr<Transport> MakeTcpTransport(Mode mode);
std::unique_ptr<Transport> MakeUnixTransport(Mode mode);

}  // namespace san::bench
