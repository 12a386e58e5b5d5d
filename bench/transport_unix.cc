// Unix stream sockets: the kernel's fastest same-host byte stream, the fairer peer for a
// shared-memory transport than TCP. The listener uses an abstract name unique to the process.
#include <sys/un.h>

#include <atomic>
#include <cstddef>
#include <cstring>

#include "transport_socket.h"

namespace san::bench {
namespace {

// `name` without the leading NUL of the abstract namespace.
socklen_t AbstractAddress(const std::string& name, sockaddr_un* sun) {
  *sun = sockaddr_un{};
  sun->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(sun->sun_path) - 1);
  std::memcpy(sun->sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

class UnixTransport : public SocketTransport<KernelCalls> {
 public:
  explicit UnixTransport(Mode mode) : SocketTransport(mode == Mode::kSpin) {}

 protected:
  Result<int> OpenListener(std::string* address) override {
    static std::atomic<int> counter{0};
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::FromErrno("socket");
    *address = "san-bench/" + std::to_string(getpid()) + "/" + std::to_string(counter++);
    sockaddr_un sun;
    const socklen_t len = AbstractAddress(*address, &sun);
    if (bind(fd, reinterpret_cast<sockaddr*>(&sun), len) != 0 || listen(fd, 16) != 0) {
      Status st = Status::FromErrno("bind/listen");
      close(fd);
      return st;
    }
    return fd;
  }

  Result<int> OpenClient(const std::string& address, const Setup&) override {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Status::FromErrno("socket");
    sockaddr_un sun;
    const socklen_t len = AbstractAddress(address, &sun);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sun), len) != 0) {
      Status st = Status::FromErrno("connect");
      close(fd);
      return st;
    }
    return fd;
  }

  Status ConfigureAccepted(int, const Setup&) override { return Status::Ok(); }
  bool HasNoDelay() const override { return false; }
};

}  // namespace

std::unique_ptr<Transport> MakeUnixTransport(Mode mode) {
  return std::make_unique<UnixTransport>(mode);
}

}  // namespace san::bench
