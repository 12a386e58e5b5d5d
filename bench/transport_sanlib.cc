// sanlib through its public C API (<san/san.h>): SOCK_SAN sockets on 127.0.0.1 (or --host), which
// the library carries over the shm provider (or verbs, when SAN_PROVIDER=verbs forces it). A
// connection that falls back to kernel TCP (or lands on the other provider) would be measuring the
// wrong thing, so both ends check san_getinfo and treat that as an error.
//
// Never busy-polled from outside: in spin mode the runner sets SAN_SPIN_US large in this process
// before the first san_* call, and the library's blocking calls spin; in block mode SAN_SPIN_US=0.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "transport_socket.h"

namespace san::bench {
namespace {

Status SetNoDelay(int fd) {
  const int on = 1;
  if (san_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) != 0) {
    return Status::FromErrno("san_setsockopt(TCP_NODELAY)");
  }
  return Status::Ok();
}

// The mode a connection must have: verbs when SAN_PROVIDER=verbs forces it (with --host an RDMA
// port's address), else shm (every connection here is to this host).
int WantedMode() {
  const char* provider = getenv("SAN_PROVIDER");
  return provider != nullptr && strcmp(provider, "verbs") == 0 ? SAN_MODE_VERBS : SAN_MODE_SHM;
}

Status CheckAccelerated(int fd, const char* side) {
  san_info info;
  if (san_getinfo(fd, &info) != 0) return Status::FromErrno("san_getinfo");
  if (info.mode == WantedMode()) return Status::Ok();
  fprintf(stderr, "san-bench: sanlib %s connection is not on %s (mode %d): %s\n", side,
          WantedMode() == SAN_MODE_VERBS ? "verbs" : "shm", info.mode, info.fallback);
  return Status(ENOTSUP, "sanlib connection is not on the expected provider");
}

class SanlibTransport : public SocketTransport<SanCalls> {
 public:
  SanlibTransport() : SocketTransport(/*busy_poll=*/false) {}

 protected:
  Result<int> OpenListener(std::string* address) override {
    const int fd = san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::FromErrno("san_socket");
    const int on = 1;
    san_setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in sin = Loopback(0);
    socklen_t len = sizeof sin;
    if (san_bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0 ||
        san_listen(fd, 16) != 0 ||
        san_getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0) {
      Status st = Status::FromErrno("san_bind/san_listen");
      san_close(fd);
      return st;
    }
    *address = std::to_string(ntohs(sin.sin_port));
    return fd;
  }

  Result<int> OpenClient(const std::string& address, const Setup& setup) override {
    const int fd = san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::FromErrno("san_socket");
    Status st;
    const sockaddr_in sin = Loopback(static_cast<uint16_t>(std::stoi(address)));
    if (setup.nodelay) st = SetNoDelay(fd);
    if (st.ok() && san_connect(fd, reinterpret_cast<const sockaddr*>(&sin), sizeof sin) != 0) {
      st = Status::FromErrno("san_connect");
    }
    if (st.ok() && setup.kind != Kind::kQuit) st = CheckAccelerated(fd, "client");
    if (!st.ok()) {
      san_close(fd);
      return st;
    }
    return fd;
  }

  Status ConfigureAccepted(int fd, const Setup& setup) override {
    if (setup.nodelay) {
      if (Status st = SetNoDelay(fd); !st.ok()) return st;
    }
    return CheckAccelerated(fd, "server");
  }

  bool HasNoDelay() const override { return true; }
};

}  // namespace

std::unique_ptr<Transport> MakeSanlibTransport(Mode) { return std::make_unique<SanlibTransport>(); }

}  // namespace san::bench
