// VerbsListener: the rdma_cm listener for one listening address (RDMA_PS_TCP, the TCP socket's
// port), the verbs rendezvous.
//
// GetRequest() reads the listener's event channel without blocking: a CONNECT_REQUEST whose
// private data decodes (verbs_wire.h) becomes a server VerbsEndpoint (moved to an event channel of
// its own, QP built, nothing accepted yet); one that does not is rejected and dropped. Other
// events are acknowledged and ignored.
//
// Thread-safety: one thread (the connection thread) at a time. Ownership: owns the event channel
// and the listening cm_id; endpoints it returns are independent of it (they may outlive it).
// Fork: like endpoints, a listener does nothing in a fork child (GetRequest: EAGAIN) and its
// destructor there releases nothing of the parent's.
#pragma once

#include <rdma/rdma_cma.h>

#include <memory>

#include "sanlib/fabric/provider.h"

namespace san::fabric::verbs {

class VerbsProvider;

class VerbsListener final : public Listener {
 public:
  static Result<std::unique_ptr<VerbsListener>> Create(const VerbsProvider& provider,
                                                       const sockaddr* addr, socklen_t len,
                                                       const EndpointAttr& attr);
  ~VerbsListener() override;

  int fd() const override { return channel_->fd; }
  Result<std::unique_ptr<Endpoint>> GetRequest() override;

 private:
  VerbsListener(const VerbsProvider& provider, const EndpointAttr& attr)
      : provider_(provider), attr_(attr) {}

  const VerbsProvider& provider_;
  const EndpointAttr attr_;
  uint32_t fork_generation_ = 0;
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* id_ = nullptr;
};

}  // namespace san::fabric::verbs
