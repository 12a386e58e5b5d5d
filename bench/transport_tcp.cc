// Kernel TCP over loopback: the baseline every SAN figure is printed beside.
// Latency runs with TCP_NODELAY on both ends; bandwidth with the kernel's defaults (Nagle on).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <string>

#include "transport_socket.h"

namespace san::bench {
namespace {

Status SetNoDelay(int fd) {
  const int on = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) != 0) {
    return Status::FromErrno("setsockopt(TCP_NODELAY)");
  }
  return Status::Ok();
}

class TcpTransport : public SocketTransport<KernelCalls> {
 public:
  explicit TcpTransport(Mode mode) : SocketTransport(mode == Mode::kSpin) {}

 protected:
  Result<int> OpenListener(std::string* address) override {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::FromErrno("socket");
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in sin = Loopback(0);
    socklen_t len = sizeof sin;
    if (bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0) {
      Status st = Status::FromErrno("bind/listen");
      close(fd);
      return st;
    }
    *address = std::to_string(ntohs(sin.sin_port));
    return fd;
  }

  Result<int> OpenClient(const std::string& address, const Setup& setup) override {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::FromErrno("socket");
    const sockaddr_in sin = Loopback(static_cast<uint16_t>(std::stoi(address)));
    if (connect(fd, reinterpret_cast<const sockaddr*>(&sin), sizeof sin) != 0) {
      Status st = Status::FromErrno("connect");
      close(fd);
      return st;
    }
    if (setup.nodelay) {
      if (Status st = SetNoDelay(fd); !st.ok()) {
        close(fd);
        return st;
      }
    }
    return fd;
  }

  Status ConfigureAccepted(int fd, const Setup& setup) override {
    return setup.nodelay ? SetNoDelay(fd) : Status::Ok();
  }

  bool HasNoDelay() const override { return true; }
};

}  // namespace

std::unique_ptr<Transport> MakeTcpTransport(Mode mode) {
  return std::make_unique<TcpTransport>(mode);
}

}  // namespace san::bench
