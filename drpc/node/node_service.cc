#include "drpc/node/node_service.h"

#include "drpc/node/data_transfer.h"
#include "drpc/node/file_transfer.h"
#include "drpc/node/system_status.h"
#include "drpc/transport/acceptor.h"

namespace san::drpc {
namespace {

void FillResult(const ExecOutcome& o, ExecResult* r) {
  r->set_exit_code(o.exit_code);
  r->set_signal(o.signal);
  r->set_timed_out(o.timed_out);
  r->set_duration_us(o.duration_us);
  r->set_output_bytes(o.output_bytes);
}

TaskState::State PhaseToProto(TaskPhase p) {
  switch (p) {
    case TaskPhase::kQueued:
      return TaskState::QUEUED;
    case TaskPhase::kRunning:
      return TaskState::RUNNING;
    case TaskPhase::kDone:
      return TaskState::DONE;
    case TaskPhase::kCancelled:
      return TaskState::CANCELLED;
  }
  return TaskState::QUEUED;
}

void FillTask(const TaskSnapshot& s, TaskState* t) {
  t->set_task_id(s.id);
  t->set_state(PhaseToProto(s.phase));
  if (s.started && s.phase != TaskPhase::kRunning) FillResult(s.outcome, t->mutable_result());
  t->set_output(s.output.empty() && !s.error.empty() ? s.error : s.output);
}

}  // namespace

NodeService::NodeService(NodeConfig config, Auth auth, std::unique_ptr<san::files::Jail> jail,
                         const Acceptor* acceptor)
    : config_(std::move(config)),
      auth_(std::move(auth)),
      jail_(std::move(jail)),
      acceptor_(acceptor),
      tasks_(config_.task_slots) {}

grpc::Status NodeService::Authorize(const grpc::ServerContext& context) const {
  std::optional<uid_t> uid;
  if (auth_.checks_uids() && acceptor_) uid = acceptor_->PeerUidOf(context.peer());
  return auth_.Check(context, uid);
}

grpc::Status NodeService::Admit(const grpc::ServerContext& context, const ExecRequest& request,
                                ExecSpec* spec) const {
  if (grpc::Status s = Authorize(context); !s.ok()) return s;
  if (request.argv_size() == 0 || request.argv(0).empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "exec: no command");
  }
  if (!config_.policy.Allows(request.argv(0))) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "exec: '" + request.argv(0).substr(0, 200) +
                            "' is not allowed by this node's command policy");
  }
  for (const std::string& a : request.argv()) {
    if (a.find('\0') != std::string::npos) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "exec: NUL byte in an argument");
    }
  }
  for (const auto& [k, v] : request.env()) {
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos ||
        v.find('\0') != std::string::npos) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "exec: bad environment entry");
    }
  }
  if (!request.cwd().empty() && request.cwd()[0] != '/') {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "exec: cwd must be absolute");
  }
  spec->argv.assign(request.argv().begin(), request.argv().end());
  spec->env.insert(request.env().begin(), request.env().end());
  spec->cwd = request.cwd();
  spec->timeout_ms = request.timeout_ms() ? request.timeout_ms() : config_.default_timeout_ms;
  if (spec->timeout_ms > config_.max_timeout_ms) spec->timeout_ms = config_.max_timeout_ms;
  return grpc::Status::OK;
}

grpc::Status NodeService::Exec(grpc::ServerContext* context, const ExecRequest* request,
                               grpc::ServerWriter<ExecChunk>* writer) {
  ExecSpec spec;
  if (grpc::Status s = Admit(*context, *request, &spec); !s.ok()) return s;
  ExecChunk chunk;
  auto sink = [&](OutputStream which, const char* data, size_t len) {
    chunk.Clear();
    if (which == OutputStream::kStdout) {
      chunk.set_stdout_data(data, len);
    } else {
      chunk.set_stderr_data(data, len);
    }
    return writer->Write(chunk);
  };
  auto cancelled = [&] { return context->IsCancelled(); };
  Result<ExecOutcome> r = RunCommand(spec, sink, cancelled);
  if (!r.ok()) return FromSanStatus(r.status());
  if (r->cancelled) return grpc::Status(grpc::StatusCode::CANCELLED, "exec: the client went away");
  chunk.Clear();
  FillResult(r.value(), chunk.mutable_result());
  writer->Write(chunk);
  return grpc::Status::OK;
}

grpc::Status NodeService::Status(grpc::ServerContext* context, const StatusRequest*,
                                 StatusReply* reply) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  const SystemStatus sys = ReadSystemStatus();
  reply->set_hostname(sys.hostname);
  reply->set_uptime_s(sys.uptime_s);
  reply->set_load1(sys.load[0]);
  reply->set_load5(sys.load[1]);
  reply->set_load15(sys.load[2]);
  reply->set_mem_total_bytes(sys.mem_total_bytes);
  reply->set_mem_available_bytes(sys.mem_available_bytes);
  reply->set_cpus(sys.cpus);
  std::string transport = acceptor_ ? acceptor_->TransportOf(context->peer()) : std::string();
  reply->set_transport(transport.empty() ? "unknown (" + context->peer() + ")" : transport);
  uint32_t queued = 0, running = 0;
  tasks_.Counts(&queued, &running);
  reply->set_tasks_queued(queued);
  reply->set_tasks_running(running);
  reply->set_version("drpcd 0.1");
  return grpc::Status::OK;
}

grpc::Status NodeService::Push(grpc::ServerContext* context, grpc::ServerReader<FileChunk>* reader,
                               PushSummary* summary) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (!jail_)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "push: node has no --root");
  return ReceivePush(*jail_, context, reader, summary);
}

grpc::Status NodeService::Pull(grpc::ServerContext* context, const PullRequest* request,
                               grpc::ServerWriter<FileChunk>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (!jail_)
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "pull: node has no --root");
  return SendPull(*jail_, context, *request, writer);
}

grpc::Status NodeService::Transfer(grpc::ServerContext* context, const TransferRequest* request,
                                   grpc::ServerWriter<TransferEvent>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  if (!jail_) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "transfer: node has no --root");
  }
  return ServeTransfer(*jail_, config_.listen_host, context, *request, writer);
}

grpc::Status NodeService::Submit(grpc::ServerContext* context, const SubmitRequest* request,
                                 SubmitReply* reply) {
  ExecSpec spec;
  if (grpc::Status s = Admit(*context, request->exec(), &spec); !s.ok()) return s;
  Result<uint64_t> id = tasks_.Submit(std::move(spec));
  if (!id.ok()) return FromSanStatus(id.status());
  reply->set_task_id(*id);
  return grpc::Status::OK;
}

grpc::Status NodeService::Wait(grpc::ServerContext* context, const TaskRef* request,
                               TaskState* reply) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  // Never wait past the caller's own deadline (less a margin to send the answer).
  uint32_t wait_ms = request->wait_ms();
  const auto left = context->deadline() - std::chrono::system_clock::now();
  const int64_t left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() - 200;
  if (left_ms < static_cast<int64_t>(wait_ms))
    wait_ms = left_ms > 0 ? static_cast<uint32_t>(left_ms) : 0;
  Result<TaskSnapshot> snap = tasks_.Wait(request->task_id(), wait_ms);
  if (!snap.ok()) return FromSanStatus(snap.status());
  FillTask(snap.value(), reply);
  return grpc::Status::OK;
}

grpc::Status NodeService::Cancel(grpc::ServerContext* context, const TaskRef* request,
                                 TaskState* reply) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  Result<TaskSnapshot> snap = tasks_.Cancel(request->task_id());
  if (!snap.ok()) return FromSanStatus(snap.status());
  FillTask(snap.value(), reply);
  return grpc::Status::OK;
}

}  // namespace san::drpc
