#include "drpc/transport/channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <grpcpp/create_channel_posix.h>
#include <grpcpp/support/channel_arguments.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "san/san.h"

namespace san::drpc {
namespace {

std::string AddressText(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  std::string out = sa->sa_family == AF_INET6 ? std::string("[") + host + "]" : std::string(host);
  out.push_back(':');
  out.append(std::to_string(port));
  return out;
}

// One address: a nonblocking connect bounded by timeout_ms. Returns the connected fd or -1 with
// errno set.
int ConnectOne(const addrinfo* ai, bool san, uint32_t timeout_ms) {
  const int type = SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC;
  const int fd = san ? san_socket(ai->ai_family, type, 0)
                     : static_cast<int>(::syscall(SYS_socket, ai->ai_family, type, 0));
  if (fd < 0) return -1;
  int rc = san_connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    do {
      rc = san_poll(&p, 1, static_cast<int>(timeout_ms));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) {
      errno = ETIMEDOUT;
      rc = -1;
    } else if (rc > 0) {
      int so_error = 0;
      socklen_t len = sizeof so_error;
      if (san_getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) {
        rc = -1;
      } else if (so_error != 0) {
        errno = so_error;
        rc = -1;
      } else {
        rc = 0;
      }
    }
  }
  if (rc != 0) {
    const int saved = errno;
    san_close(fd);
    errno = saved;
    return -1;
  }
  // Unary RPCs are small request/response exchanges: no Nagle (and, on SAN, no combining).
  const int one = 1;
  san_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

std::string DescribeSocket(int fd) {
  if (!san_is_socket(fd)) return "kernel";
  san_info info{};
  if (san_getinfo(fd, &info) != 0) return "unknown";
  switch (info.mode) {
    case SAN_MODE_SHM:
      return "shm";
    case SAN_MODE_VERBS:
      return "verbs";
    case SAN_MODE_TCP:
      return info.fallback[0] ? std::string("tcp (") + info.fallback + ")" : std::string("tcp");
    default:
      return "unconnected";
  }
}

int ConnectTarget(const Target& target, uint32_t timeout_ms, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string port = std::to_string(target.port);
  const int gai = getaddrinfo(target.host.c_str(), port.c_str(), &hints, &list);
  if (gai != 0) {
    *error = "resolve " + target.host + ": " + gai_strerror(gai);
    return -1;
  }
  int fd = -1;
  std::string last;
  for (const addrinfo* ai = list; ai && fd < 0; ai = ai->ai_next) {
    fd = ConnectOne(ai, target.san, timeout_ms);
    if (fd < 0) {
      last = "connect " + AddressText(ai->ai_addr) + ": " + strerror(errno);
    }
  }
  freeaddrinfo(list);
  if (fd < 0) *error = last.empty() ? std::string("no address for ") + target.host : last;
  return fd;
}

std::shared_ptr<grpc::Channel> MakeChannel(const Target& target, uint32_t timeout_ms,
                                           std::string* error, ChannelInfo* info) {
  const int fd = ConnectTarget(target, timeout_ms, error);
  if (fd < 0) return nullptr;
  if (info) info->mode = DescribeSocket(fd);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  // gRPC takes the fd (and closes it, through the interposed close, with the channel).
  return grpc::CreateCustomInsecureChannelFromFd(target.spec, fd, args);
}

}  // namespace san::drpc
