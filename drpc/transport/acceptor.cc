#include "drpc/transport/acceptor.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <grpcpp/server_posix.h>

#include <cstring>

#include "drpc/transport/channel.h"
#include "san/san.h"
#include "sanlib/common/log.h"
#include "sanlib/common/peer_uid.h"

namespace san::drpc {
namespace {
constexpr size_t kRememberedPeers = 4096;

// The uid of a connection within this host (a SAN connection's TCP socket is a real one too);
// none for a remote peer or when the lookup fails (the call then needs the token).
std::optional<uid_t> LearnPeerUid(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t llen = sizeof local, plen = sizeof peer;
  if (san_getsockname(fd, reinterpret_cast<sockaddr*>(&local), &llen) != 0 ||
      san_getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) {
    return std::nullopt;
  }
  if (!PeerIsOnThisHost(local, peer)) return std::nullopt;
  Result<uid_t> uid = LookupPeerUid(local, peer);
  if (!uid.ok()) {
    SAN_LOG_WARN("drpcd: peer uid of a local connection: %s", uid.status().ToString().c_str());
    return std::nullopt;
  }
  return *uid;
}
}  // namespace

Result<int> ListenSan(const std::string& host, uint16_t port, int backlog, uint16_t* bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string port_text = std::to_string(port);
  if (getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &list) != 0) {
    return Status(EINVAL, "listen: cannot resolve the listen address");
  }
  int listen_fd = -1;
  Status failed = Status(EADDRNOTAVAIL, "listen: no usable address");
  for (const addrinfo* ai = list; ai; ai = ai->ai_next) {
    const int fd = san_socket(ai->ai_family, SOCK_SAN | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      failed = Status::FromErrno("socket");
      continue;
    }
    const int one = 1;
    san_setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (san_bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      failed = Status::FromErrno("bind");
      san_close(fd);
      continue;
    }
    if (san_listen(fd, backlog) != 0) {
      failed = Status::FromErrno("listen");
      san_close(fd);
      continue;
    }
    listen_fd = fd;
    break;
  }
  freeaddrinfo(list);
  if (listen_fd < 0) return failed;
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  san_getsockname(listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  *bound_port =
      ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return listen_fd;
}

Result<std::unique_ptr<Acceptor>> Acceptor::Listen(const std::string& host, uint16_t port) {
  std::unique_ptr<Acceptor> a(new Acceptor());
  Result<int> fd = ListenSan(host, port, 128, &a->port_);
  if (!fd.ok()) return fd.status();
  a->listen_fd_ = *fd;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return Status::FromErrno("pipe2");
  a->wake_read_.reset(pipe_fds[0]);
  a->wake_write_.reset(pipe_fds[1]);
  return a;
}

Acceptor::~Acceptor() {
  Stop();
  if (listen_fd_ >= 0) san_close(listen_fd_);
}

void Acceptor::Start(grpc::Server* server) {
  thread_ = std::thread([this, server] { Loop(server); });
}

void Acceptor::Stop() {
  if (!thread_.joinable()) return;
  const char byte = 0;
  (void)!::write(wake_write_.get(), &byte, 1);
  thread_.join();
}

void Acceptor::Loop(grpc::Server* server) {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_.get(), POLLIN, 0}};
    const int n = san_poll(fds, 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      SAN_LOG_ERROR("drpcd: poll on the listener: %s", strerror(errno));
      return;
    }
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    const int fd = san_accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      // A client that gave up before we accepted, or fd exhaustion: log and keep serving.
      if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
        SAN_LOG_WARN("drpcd: accept: %s", strerror(errno));
        if (errno == EMFILE || errno == ENFILE) usleep(10000);
      }
      continue;
    }
    const int one = 1;
    san_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    san_fcntl(fd, F_SETFL, san_fcntl(fd, F_GETFL) | O_NONBLOCK);
    PeerInfo info;
    info.mode = DescribeSocket(fd);
    (info.mode == "shm" ? accepted_shm_ : accepted_tcp_).fetch_add(1);
    if (learn_uids_) info.uid = LearnPeerUid(fd);
    // gRPC names a connection it was handed by fd "fd:<n>" (ServerContext::peer()); the number
    // is reused only after gRPC closed it, and the entry is then overwritten.
    Remember("fd:" + std::to_string(fd), std::move(info));
    grpc::AddInsecureChannelFromFd(server, fd);  // gRPC owns fd from here
  }
}

void Acceptor::Remember(const std::string& peer, PeerInfo info) {
  std::lock_guard<std::mutex> lock(mu_);
  if (peers_.insert_or_assign(peer, std::move(info)).second) order_.push_back(peer);
  while (order_.size() > kRememberedPeers) {
    peers_.erase(order_.front());
    order_.pop_front();
  }
}

std::string Acceptor::TransportOf(const std::string& grpc_peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(grpc_peer);
  return it == peers_.end() ? std::string() : it->second.mode;
}

std::optional<uid_t> Acceptor::PeerUidOf(const std::string& grpc_peer) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peers_.find(grpc_peer);
  return it == peers_.end() ? std::nullopt : it->second.uid;
}

}  // namespace san::drpc
