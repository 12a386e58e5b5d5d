// Server side of the transport: one listening SAN socket whose connections are handed to a
// running grpc::Server (grpc::AddInsecureChannelFromFd).
//
// One port serves both kinds of client: a sanlib client (san://) gets a shared-memory channel set
// up beside the TCP connection; any other client -- drpc with a plain host:port target, Python's
// grpcio, grpcurl -- is an ordinary TCP connection that sanlib's server-side fallback leaves on
// kernel TCP. gRPC itself opens no listening socket.
// The accept loop runs on its own thread; Stop() wakes it (self-pipe) and joins it. Each accepted
// connection's mode -- and, with set_learn_peer_uids(true), the uid owning the peer's socket when
// the peer is on this host (common/peer_uid.h) -- is recorded under gRPC's peer string for it
// ("fd:<n>") so a handler can say which transport its call came over and Auth can check the user.
// Thread-safety: Start/Stop from one thread; TransportOf and counters from any thread.
#pragma once

#include <sys/socket.h>

#include <grpcpp/server.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "sanlib/common/status.h"
#include "sanlib/common/unique_fd.h"

namespace san::drpc {

// A listening SAN socket (SOCK_SAN: it accepts sanlib and plain TCP clients alike) on host:port
// (port 0: the kernel picks; *bound_port gets the port). Closed with san_close.
Result<int> ListenSan(const std::string& host, uint16_t port, int backlog, uint16_t* bound_port);

class Acceptor {
 public:
  // Binds host:port (port 0: the kernel picks; see port()) and listens.
  static Result<std::unique_ptr<Acceptor>> Listen(const std::string& host, uint16_t port);
  ~Acceptor();

  uint16_t port() const { return port_; }
  // Before Start(): look up each connection's peer uid at accept (one netlink query each).
  void set_learn_peer_uids(bool on) { learn_uids_ = on; }
  // Starts handing connections to server (already started, and outliving Stop()).
  void Start(grpc::Server* server);
  void Stop();

  // "shm" / "tcp (reason)" for a peer string of a connection accepted here; "" if unknown.
  std::string TransportOf(const std::string& grpc_peer) const;
  // The uid owning the peer's socket, if learnt (a connection within this host); none otherwise.
  std::optional<uid_t> PeerUidOf(const std::string& grpc_peer) const;
  uint64_t accepted_shm() const { return accepted_shm_.load(); }
  uint64_t accepted_tcp() const { return accepted_tcp_.load(); }

 private:
  Acceptor() = default;
  void Loop(grpc::Server* server);
  struct PeerInfo {
    std::string mode;
    std::optional<uid_t> uid;
  };
  void Remember(const std::string& peer, PeerInfo info);

  int listen_fd_ = -1;  // a SAN socket: closed with san_close
  uint16_t port_ = 0;
  UniqueFd wake_read_, wake_write_;
  std::thread thread_;
  std::atomic<uint64_t> accepted_shm_{0}, accepted_tcp_{0};
  mutable std::mutex mu_;
  bool learn_uids_ = false;
  std::map<std::string, PeerInfo> peers_;  // bounded (oldest dropped)
  std::deque<std::string> order_;
};

}  // namespace san::drpc
