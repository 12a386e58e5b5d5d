#include "sanlib/fabric/verbs/verbs_listener.h"

#include <fcntl.h>
#include <unistd.h>

#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/fabric/verbs/verbs_endpoint.h"
#include "sanlib/fabric/verbs/verbs_library.h"
#include "sanlib/fabric/verbs/verbs_provider.h"
#include "sanlib/fabric/verbs/verbs_wire.h"

namespace san::fabric::verbs {

Result<std::unique_ptr<VerbsListener>> VerbsListener::Create(const VerbsProvider& provider,
                                                             const sockaddr* addr, socklen_t len,
                                                             const EndpointAttr& attr) {
  if (addr == nullptr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) ||
      len < (addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6))) {
    return Status(EAFNOSUPPORT, "verbs listen");
  }
  std::unique_ptr<VerbsListener> l(new VerbsListener(provider, attr));
  l->fork_generation_ = ForkGeneration();
  l->channel_ = rdma().create_event_channel();
  if (l->channel_ == nullptr) return Status::FromErrno("rdma_create_event_channel");
  const int fl = kernel::fcntl(l->channel_->fd, F_GETFL);
  if (fl < 0 || kernel::fcntl(l->channel_->fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
      kernel::fcntl(l->channel_->fd, F_SETFD, FD_CLOEXEC) < 0) {
    return Status::FromErrno("fcntl(rdma channel)");
  }
  if (rdma().create_id(l->channel_, &l->id_, nullptr, RDMA_PS_TCP) != 0) {
    return Status::FromErrno("rdma_create_id");
  }
  // rdma_bind_addr takes a non-const sockaddr; it does not write it.
  if (rdma().bind_addr(l->id_, const_cast<sockaddr*>(addr)) != 0) {
    return Status::FromErrno("rdma_bind_addr");  // EADDRINUSE: a second listener
  }
  if (rdma().listen(l->id_, 128) != 0) return Status::FromErrno("rdma_listen");
  return l;
}

VerbsListener::~VerbsListener() {
  if (ForkGeneration() != fork_generation_) {
    // The parent's listener: destroying the id through the shared ucma file would end it there.
    if (channel_ != nullptr) kernel::close(channel_->fd);
    return;
  }
  if (id_ != nullptr) rdma().destroy_id(id_);
  if (channel_ != nullptr) rdma().destroy_event_channel(channel_);
}

Result<std::unique_ptr<Endpoint>> VerbsListener::GetRequest() {
  if (ForkGeneration() != fork_generation_) return Status(EAGAIN, "verbs listener (fork child)");
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma().get_cm_event(channel_, &event) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        return Status(EAGAIN, "verbs listener");
      }
      return Status::FromErrno("rdma_get_cm_event");
    }
    if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      // Events of ids not yet moved to their own channel, or of the listener itself.
      SAN_LOG_DEBUG("verbs listener: ignoring %s", rdma().event_str(event->event));
      rdma().ack_cm_event(event);
      continue;
    }
    rdma_cm_id* id = event->id;
    Result<ConnectData> data =
        DecodeRequest(event->param.conn.private_data, event->param.conn.private_data_len);
    rdma().ack_cm_event(event);
    if (!data.ok()) {
      SAN_LOG_INFO("verbs listener: rejecting a request: %s", data.status().ToString().c_str());
      rdma().reject(id, nullptr, 0);
      rdma().destroy_id(id);
      continue;
    }
    Result<std::unique_ptr<VerbsEndpoint>> ep =
        VerbsEndpoint::CreateServer(provider_, attr_, id, data.value());
    if (!ep.ok()) return ep.status();  // CreateServer rejected and released the id
    return std::unique_ptr<Endpoint>(std::move(ep).value());
  }
}

}  // namespace san::fabric::verbs
