// conn-bench: the san and tcp call tables (transport.h).
#include "transport.h"

#include <arpa/inet.h>
#include <poll.h>
#include <san/san.h>
#include <unistd.h>

#include <cerrno>

namespace san::connbench {
namespace {

int TcpClose(int fd) { return ::close(fd); }
int TcpPoll(pollfd* fds, nfds_t nfds, int timeout_ms) { return ::poll(fds, nfds, timeout_ms); }

constexpr Calls kSan = {"san",      SOCK_SAN,          san_socket,     san_bind,
                        san_listen, san_accept,        san_connect,    san_send,
                        san_recv,   san_close,         san_setsockopt, san_getsockname,
                        san_poll,   san_epoll_create1, san_epoll_ctl,  san_epoll_wait};
constexpr Calls kTcp = {"tcp",    SOCK_STREAM,     ::socket,     ::bind,
                        ::listen, ::accept,        ::connect,    ::send,
                        ::recv,   TcpClose,        ::setsockopt, ::getsockname,
                        TcpPoll,  ::epoll_create1, ::epoll_ctl,  ::epoll_wait};

}  // namespace

const Calls* FindCalls(const std::string& name) {
  if (name == "san") return &kSan;
  if (name == "tcp") return &kTcp;
  return nullptr;
}

std::string ConnectionMode(const Calls& calls, int fd, std::string* why) {
  if (&calls != &kSan) return "tcp";
  san_info info{};
  if (san_getinfo(fd, &info) != 0) return "unknown";
  switch (info.mode) {
    case SAN_MODE_SHM:
      return "shm";
    case SAN_MODE_VERBS:
      return "verbs";
    case SAN_MODE_TCP:
      if (why != nullptr) *why = info.fallback;
      return "tcp";
    default:
      return "none";
  }
}

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return sin;
}

int OpenListener(const Calls& calls, int backlog, uint16_t* port) {
  const int fd = calls.socket(AF_INET, calls.socket_type | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int on = 1;
  calls.setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in sin = Loopback(0);
  socklen_t len = sizeof sin;
  if (calls.bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0 ||
      calls.listen(fd, backlog) != 0 ||
      calls.getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0) {
    const int saved = errno;
    calls.close(fd);
    errno = saved;
    return -1;
  }
  *port = ntohs(sin.sin_port);
  return fd;
}

}  // namespace san::connbench
