#include "drpc/client/ping_caller.h"

namespace san::drpc {

PingCaller::~PingCaller() {
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
  }
}

grpc::Status PingCaller::Call(grpc::ClientContext* context, const PingRequest& request,
                              PingReply* reply) {
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<PingReply>> rpc =
      stub_->AsyncPing(context, request, &cq_);
  int done = 0;  // its address is the tag: unique while the call is in flight
  rpc->Finish(reply, &status, &done);
  void* tag = nullptr;
  bool ok = false;
  // Calls are one at a time: the next event is this call's (Finish always comes back, ok or
  // not, once the call ends: answered, failed, or past its deadline).
  while (cq_.Next(&tag, &ok)) {
    if (tag == &done) return status;
  }
  return grpc::Status(grpc::StatusCode::INTERNAL, "ping: completion queue shut down");
}

}  // namespace san::drpc
