// PingServer: serves drpc.Node/Ping on gRPC's asynchronous API, from one thread of its own that
// drives one completion queue: the thread that polls the request in answers it, with no hand-off.
//
// Why: Ping is the latency probe (drpc ping, drpc-bench), and gRPC 1.51's other server APIs add
// thread hops to every call: the sync API's thread manager creates a new poller thread whenever
// the one that picked up a call is busy with it (one thread created and one ended per call with a
// single poller; futex hand-offs between pollers with two), and the callback API runs reactors on
// three "nexting" threads of its own. Those hops cost more than the transport itself on a small
// call, and the SAN-vs-TCP comparison is about the transport. The other methods may block (Exec,
// Push, Wait) and stay on the sync API's threads.
// Lifecycle: construct with the service (before ServerBuilder::BuildAndStart, which needs the
// queue), Start() after the server started, Shutdown() after grpc::Server::Shutdown (it drains
// the queue and joins the thread). Thread-safety: Start/Shutdown from one thread; the loop
// thread re-arms calls under mu_, which Shutdown() takes before shutting the queue down.
#pragma once

#include <grpcpp/server_builder.h>

#include <memory>
#include <mutex>
#include <thread>

#include "drpc/proto/drpc_proto.h"

namespace san::drpc {

using AsyncPingService = Node::WithAsyncMethod_Ping<Node::Service>;

class PingServer {
 public:
  PingServer(AsyncPingService* service, grpc::ServerBuilder* builder);
  ~PingServer();
  PingServer(const PingServer&) = delete;
  PingServer& operator=(const PingServer&) = delete;

  void Start();
  void Shutdown();

 private:
  class Call;
  void Loop();

  AsyncPingService* const service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  std::mutex mu_;
  bool draining_ = false;  // under mu_: Shutdown() began, request nothing more
};

}  // namespace san::drpc
