#include "drpc/node/ping_server.h"

namespace san::drpc {
namespace {
// Calls waiting to be matched at once: a Ping arriving while all are being answered waits in
// gRPC until one is re-armed; more than one lets concurrent pingers overlap.
constexpr int kPendingCalls = 4;
}  // namespace

// One Ping: requested (waiting to be matched), then answered. The queue's tag is the Call; its
// state says which of the two events came back.
class PingServer::Call {
 public:
  Call(AsyncPingService* service, grpc::ServerCompletionQueue* cq) {
    service->RequestPing(&context_, &request_, &writer_, cq, cq, this);
  }

  // An event for this call. True: the call is over (answered, or never matched because the
  // server is shutting down) and is to be deleted.
  bool Proceed(bool ok) {
    if (!ok || answering_) return true;
    answering_ = true;
    reply_.set_payload(request_.payload());
    writer_.Finish(reply_, grpc::Status::OK, this);
    return false;
  }

 private:
  grpc::ServerContext context_;
  PingRequest request_;
  PingReply reply_;
  grpc::ServerAsyncResponseWriter<PingReply> writer_{&context_};
  bool answering_ = false;
};

PingServer::PingServer(AsyncPingService* service, grpc::ServerBuilder* builder)
    : service_(service), cq_(builder->AddCompletionQueue()) {}

PingServer::~PingServer() { Shutdown(); }

void PingServer::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < kPendingCalls; ++i) new Call(service_, cq_.get());
  }
  thread_ = std::thread([this] { Loop(); });
}

void PingServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) return;
    draining_ = true;  // from here on nothing is requested on the queue...
  }
  cq_->Shutdown();  // ...so shutting it down cannot race a request
  if (thread_.joinable()) thread_.join();
  // Never started: nobody drained the queue.
  void* tag;
  bool ok;
  while (cq_->Next(&tag, &ok)) delete static_cast<Call*>(tag);
}

void PingServer::Loop() {
  void* tag;
  bool ok;
  while (cq_->Next(&tag, &ok)) {
    Call* call = static_cast<Call*>(tag);
    if (!call->Proceed(ok)) continue;
    delete call;
    if (!ok) continue;  // the server is shutting down: nothing more to request
    std::lock_guard<std::mutex> lock(mu_);
    if (!draining_) new Call(service_, cq_.get());
  }
}

}  // namespace san::drpc
