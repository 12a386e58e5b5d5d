// ShmListener: the server end of the shm rendezvous for one listening address.
//
// GetRequest() accepts pending Unix connections (rejecting other uids via SO_PEERCRED), reads each
// one's RequestMessage when it arrives, validates it (magic, version, geometry bounds, a sealed
// memfd of exactly the size we compute ourselves, real eventfds) and returns a server ShmEndpoint.
// A bad request is answered with its errno and dropped; connections that have not sent their
// request yet wait in a small pending set (bounded in number and time), so a slow or silent client
// never blocks the connection thread. Out of fds to accept with, the backlog is reset: its clients
// learn at once and stay kernel TCP.
//
// Thread-safety: one thread (the connection thread) at a time. Ownership: owns the listening
// socket, the epoll set behind fd() and the pending connections; endpoints it returns are
// independent of it (they may outlive the listener).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sanlib/common/unique_fd.h"
#include "sanlib/fabric/provider.h"

namespace san::fabric::shm {

class ShmListener final : public Listener {
 public:
  // `proved`: clients of any user are admitted, and each request must carry a proof descriptor
  // (Provider::ListenProved); otherwise only our own user's.
  static Result<std::unique_ptr<ShmListener>> Create(const std::string& key,
                                                     const EndpointAttr& attr, uint32_t mtu,
                                                     bool proved = false);

  int fd() const override { return epoll_.get(); }
  Result<std::unique_ptr<Endpoint>> GetRequest() override;

 private:
  struct Pending {
    UniqueFd sock;
    uint64_t deadline_ns;
  };
  ShmListener(std::string key, UniqueFd sock, UniqueFd epoll, const EndpointAttr& attr,
              uint32_t mtu, bool proved);
  void AcceptPending();
  void Drop(size_t index, int error);
  // The process is out of fds, so the clients waiting in the backlog cannot be accepted (nor
  // told no): the listening socket is made anew, which resets them at once -- they go on over
  // kernel TCP -- instead of leaving them to their time-out.
  void ResetBacklog();

  std::string key_;
  UniqueFd sock_;
  UniqueFd epoll_;
  EndpointAttr attr_;
  uint32_t mtu_;
  bool proved_;
  std::vector<Pending> pending_;
};

}  // namespace san::fabric::shm
