// NodeService: drpcd's implementation of drpc.Node (proto/drpc.proto), on gRPC's synchronous API
// (each call runs on a thread of gRPC's pool, so a long Exec blocks nobody else) but for Ping.
//
// Every call but Ping passes Auth first; Exec and Submit then pass the command policy. Exec's
// timeout is the request's, capped by the node's maximum (and the node's default when 0).
// Thread-safety: all members are immutable or thread-safe (TaskQueue); the Acceptor outlives the
// service.
#pragma once

#include <memory>
#include <string>

#include "drpc/core/command_policy.h"
#include "drpc/node/auth.h"
#include "drpc/node/exec_runner.h"
#include "drpc/node/ping_server.h"
#include "drpc/node/task_queue.h"
#include "drpc/proto/drpc_proto.h"
#include "files/jail.h"

namespace san::drpc {

class Acceptor;

struct NodeConfig {
  CommandPolicy policy;
  uint32_t default_timeout_ms = 60000;
  uint32_t max_timeout_ms = 3600000;
  size_t task_slots = 2;
  std::string listen_host = "0.0.0.0";  // where Transfer's data connections are offered
};

// Ping is served on gRPC's asynchronous API by a PingServer (node/ping_server.h): see there why.
class NodeService final : public AsyncPingService {
 public:
  NodeService(NodeConfig config, Auth auth, std::unique_ptr<san::files::Jail> jail,
              const Acceptor* acceptor);

  grpc::Status Exec(grpc::ServerContext* context, const ExecRequest* request,
                    grpc::ServerWriter<ExecChunk>* writer) override;
  grpc::Status Status(grpc::ServerContext* context, const StatusRequest* request,
                      StatusReply* reply) override;
  grpc::Status Push(grpc::ServerContext* context, grpc::ServerReader<FileChunk>* reader,
                    PushSummary* summary) override;
  grpc::Status Pull(grpc::ServerContext* context, const PullRequest* request,
                    grpc::ServerWriter<FileChunk>* writer) override;
  grpc::Status Transfer(grpc::ServerContext* context, const TransferRequest* request,
                        grpc::ServerWriter<TransferEvent>* writer) override;
  grpc::Status Submit(grpc::ServerContext* context, const SubmitRequest* request,
                      SubmitReply* reply) override;
  grpc::Status Wait(grpc::ServerContext* context, const TaskRef* request,
                    TaskState* reply) override;
  grpc::Status Cancel(grpc::ServerContext* context, const TaskRef* request,
                      TaskState* reply) override;

 private:
  // Auth for this call (token, or the Unix user of its connection as the Acceptor learnt it).
  grpc::Status Authorize(const grpc::ServerContext& context) const;
  // Auth and policy for a command; fills spec on success.
  grpc::Status Admit(const grpc::ServerContext& context, const ExecRequest& request,
                     ExecSpec* spec) const;

  const NodeConfig config_;
  const Auth auth_;
  const std::unique_ptr<san::files::Jail> jail_;  // null: no file root, Push/Pull refused
  const Acceptor* const acceptor_;
  TaskQueue tasks_;
};

}  // namespace san::drpc
