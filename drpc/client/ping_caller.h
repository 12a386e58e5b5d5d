// PingCaller: Ping calls made one after another on one completion queue that the calling thread
// drives itself (gRPC's async client API), for the latency probes (drpc ping, drpc-bench).
//
// Why not the generated blocking stub: each blocking call makes a completion queue of its own and
// throws it away (and with gRPC's poll engine every new queue's pollset also makes and closes an
// eventfd) -- work per call that has nothing to do with the transport. One queue for the whole
// series costs nothing per call, and the thread that waits is still the one that does the I/O.
// Thread-safety: one PingCaller per thread (the stub may be shared).
#pragma once

#include <grpcpp/client_context.h>
#include <grpcpp/completion_queue.h>

#include "drpc/proto/drpc_proto.h"

namespace san::drpc {

class PingCaller {
 public:
  explicit PingCaller(Node::Stub* stub) : stub_(stub) {}
  ~PingCaller();
  PingCaller(const PingCaller&) = delete;
  PingCaller& operator=(const PingCaller&) = delete;

  // One call, waited for on this thread (the context's deadline bounds it, as for the stub).
  grpc::Status Call(grpc::ClientContext* context, const PingRequest& request, PingReply* reply);

 private:
  Node::Stub* const stub_;
  grpc::CompletionQueue cq_;
};

}  // namespace san::drpc
