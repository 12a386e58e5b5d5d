#include "transport.h"

namespace san::bench {
namespace {

in_addr bench_address{htonl(INADDR_LOOPBACK)};

}  // namespace

void SetBenchAddress(in_addr address) { bench_address = address; }
in_addr BenchAddress() { return bench_address; }

// The one list of transports.
std::unique_ptr<Transport> MakeTransport(std::string_view name, Mode mode) {
  if (name == "raw-shm") return MakeRawShmTransport(mode);
  if (name == "sanlib") return MakeSanlibTransport(mode);
  if (name == "tcp") return MakeTcpTransport(mode);
  if (name == "unix") return MakeUnixTransport(mode);
  return nullptr;
}

}  // namespace san::bench
