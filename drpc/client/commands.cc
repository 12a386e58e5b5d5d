#include "drpc/client/commands.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <vector>

#include "drpc/client/data_transfer.h"
#include "drpc/client/part_file.h"
#include "drpc/client/ping_caller.h"
#include "drpc/core/checksum.h"
#include "drpc/core/token.h"
#include "drpc/proto/transfer.h"
#include "drpc/transport/channel.h"
#include "sanlib/common/unique_fd.h"

namespace san::drpc {

std::string DescribeStatus(const grpc::Status& s) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int code = static_cast<int>(s.error_code());
  std::string out = code >= 0 && code <= 16 ? kNames[code] : std::to_string(code);
  if (!s.error_message().empty()) {
    out += ": ";
    out += s.error_message();
  }
  return out;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string Fixed(double v, int digits = 1) {
  char buf[48];
  snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string JsonNumber(const char* key, double v) {
  return std::string(",\"") + key + "\":" + (std::isfinite(v) ? Fixed(v, 3) : std::string("null"));
}
std::string JsonUint(const char* key, uint64_t v) {
  return std::string(",\"") + key + "\":" + std::to_string(v);
}
std::string JsonText(const char* key, std::string_view v) {
  return std::string(",\"") + key + "\":" + JsonString(v);
}

// ok iff the command exited 0; otherwise the reason.
bool Judge(const ExecResult& r, std::string* why) {
  if (r.timed_out()) {
    *why = "timed out (killed)";
  } else if (r.signal() != 0) {
    *why = "killed by signal " + std::to_string(r.signal());
  } else if (r.exit_code() != 0) {
    *why = "exit status " + std::to_string(r.exit_code());
  } else {
    return true;
  }
  return false;
}

std::string ResultJson(const ExecResult& r) {
  return JsonUint("exit_code", static_cast<uint64_t>(r.exit_code())) +
         JsonUint("signal", static_cast<uint64_t>(r.signal())) + std::string(",\"timed_out\":") +
         (r.timed_out() ? "true" : "false") + JsonUint("duration_us", r.duration_us());
}

void FillExec(const CliOptions& o, ExecRequest* req) {
  for (const std::string& a : o.argv) req->add_argv(a);
  for (const auto& [k, v] : o.env) (*req->mutable_env())[k] = v;
  req->set_cwd(o.cwd);
  req->set_timeout_ms(o.cmd_timeout_ms);
}

const char* PhaseName(TaskState::State s) {
  switch (s) {
    case TaskState::QUEUED:
      return "queued";
    case TaskState::RUNNING:
      return "running";
    case TaskState::DONE:
      return "done";
    case TaskState::CANCELLED:
      return "cancelled";
    default:
      return "unknown";
  }
}

HostResult Ping(const CliOptions& o, const CallSettings& cs, Node::Stub* stub,
                const std::string& transport, Output* out, const std::string& host) {
  HostResult r;
  PingRequest req;
  std::string payload(o.size, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 + 7);
  req.set_payload(payload);
  std::vector<double> us;
  us.reserve(o.count);
  PingCaller caller(stub);
  for (uint32_t i = 0; i < o.count; ++i) {
    auto ctx = MakeContext(cs, cs.timeout_ms);
    PingReply reply;
    const Clock::time_point t0 = Clock::now();
    grpc::Status s = caller.Call(ctx.get(), req, &reply);
    const double elapsed = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!s.ok()) {
      r.error = "ping: " + DescribeStatus(s);
      return r;
    }
    if (reply.payload() != payload) {
      r.error = "ping: the reply differs from the payload";
      return r;
    }
    us.push_back(elapsed);
  }
  std::vector<double> sorted = us;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double v : us) sum += v;
  const double mean = sum / static_cast<double>(us.size());
  const size_t p99_index = std::min(sorted.size() - 1, (sorted.size() * 99 + 99) / 100 - 1);
  const double p99 = sorted[p99_index];
  out->Line(host, std::to_string(o.count) + " x " + std::to_string(o.size) + " B: mean " +
                      Fixed(mean) + " us, p99 " + Fixed(p99) + " us, min " + Fixed(sorted[0]) +
                      " us (" + transport + ")");
  r.ok = true;
  r.json = JsonUint("count", o.count) + JsonUint("size", o.size) + JsonNumber("mean_us", mean) +
           JsonNumber("p99_us", p99) + JsonNumber("min_us", sorted[0]) +
           JsonText("transport", transport);
  return r;
}

HostResult Exec(const CliOptions& o, const CallSettings& cs, Node::Stub* stub, Output* out,
                const std::string& host) {
  HostResult r;
  ExecRequest req;
  FillExec(o, &req);
  // The call may last as long as the command is allowed to, and some more to deliver the result.
  const uint32_t deadline = std::max(cs.timeout_ms, o.cmd_timeout_ms + 5000);
  auto ctx = MakeContext(cs, deadline);
  std::unique_ptr<grpc::ClientReader<ExecChunk>> reader = stub->Exec(ctx.get(), req);
  HostStream out_lines(out, host, false), err_lines(out, host, true);
  std::string out_text, err_text;  // --json: kept (the first 1 MiB each)
  constexpr size_t kJsonKeep = 1024 * 1024;
  ExecChunk chunk;
  bool have_result = false;
  ExecResult result;
  while (reader->Read(&chunk)) {
    switch (chunk.kind_case()) {
      case ExecChunk::kStdoutData:
        if (out->json()) {
          out_text.append(
              chunk.stdout_data().substr(0, kJsonKeep - std::min(kJsonKeep, out_text.size())));
        } else {
          out_lines.Write(chunk.stdout_data());
        }
        break;
      case ExecChunk::kStderrData:
        if (out->json()) {
          err_text.append(
              chunk.stderr_data().substr(0, kJsonKeep - std::min(kJsonKeep, err_text.size())));
        } else {
          err_lines.Write(chunk.stderr_data());
        }
        break;
      case ExecChunk::kResult:
        result = chunk.result();
        have_result = true;
        break;
      default:
        break;
    }
  }
  out_lines.Flush();
  err_lines.Flush();
  grpc::Status s = reader->Finish();
  if (!s.ok()) {
    r.error = "exec: " + DescribeStatus(s);
    return r;
  }
  if (!have_result) {
    r.error = "exec: the node sent no result";
    return r;
  }
  r.ok = Judge(result, &r.error);
  r.json = ResultJson(result) + JsonText("stdout", out_text) + JsonText("stderr", err_text);
  return r;
}

HostResult StatusCall(const CallSettings& cs, Node::Stub* stub, Output* out,
                      const std::string& host) {
  HostResult r;
  auto ctx = MakeContext(cs, cs.timeout_ms);
  StatusReply s;
  grpc::Status st = stub->Status(ctx.get(), StatusRequest(), &s);
  if (!st.ok()) {
    r.error = "status: " + DescribeStatus(st);
    return r;
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  out->Line(host, s.hostname() + " up " + Fixed(s.uptime_s() / 3600.0) + " h, load " +
                      Fixed(s.load1(), 2) + " " + Fixed(s.load5(), 2) + " " + Fixed(s.load15(), 2) +
                      ", mem " + Fixed(static_cast<double>(s.mem_available_bytes()) / kMiB, 0) +
                      "/" + Fixed(static_cast<double>(s.mem_total_bytes()) / kMiB, 0) +
                      " MiB free, " + std::to_string(s.cpus()) + " cpus, tasks " +
                      std::to_string(s.tasks_queued()) + " queued " +
                      std::to_string(s.tasks_running()) + " running, transport " + s.transport());
  r.ok = true;
  r.json = JsonText("hostname", s.hostname()) + JsonNumber("uptime_s", s.uptime_s()) +
           JsonNumber("load1", s.load1()) + JsonNumber("load5", s.load5()) +
           JsonNumber("load15", s.load15()) + JsonUint("mem_total_bytes", s.mem_total_bytes()) +
           JsonUint("mem_available_bytes", s.mem_available_bytes()) + JsonUint("cpus", s.cpus()) +
           JsonUint("tasks_queued", s.tasks_queued()) +
           JsonUint("tasks_running", s.tasks_running()) + JsonText("transport", s.transport()) +
           JsonText("version", s.version());
  return r;
}

HostResult TaskCall(const CliOptions& o, const CallSettings& cs, Node::Stub* stub, Output* out,
                    const std::string& host) {
  HostResult r;
  if (o.command == Command::kSubmit) {
    SubmitRequest req;
    FillExec(o, req.mutable_exec());
    auto ctx = MakeContext(cs, cs.timeout_ms);
    SubmitReply reply;
    grpc::Status s = stub->Submit(ctx.get(), req, &reply);
    if (!s.ok()) {
      r.error = "submit: " + DescribeStatus(s);
      return r;
    }
    out->Line(host, "task " + std::to_string(reply.task_id()));
    r.ok = true;
    r.json = JsonUint("task_id", reply.task_id());
    return r;
  }
  TaskRef ref;
  ref.set_task_id(o.task_id);
  ref.set_wait_ms(o.wait_ms);
  TaskState state;
  const bool wait = o.command == Command::kWait;
  auto ctx = MakeContext(cs, wait ? std::max(cs.timeout_ms, o.wait_ms + 5000) : cs.timeout_ms);
  grpc::Status s = wait ? stub->Wait(ctx.get(), ref, &state) : stub->Cancel(ctx.get(), ref, &state);
  if (!s.ok()) {
    r.error = std::string(wait ? "wait: " : "cancel: ") + DescribeStatus(s);
    return r;
  }
  if (wait && !state.output().empty()) {
    HostStream lines(out, host, false);
    lines.Write(state.output());
  }
  out->Line(host, "task " + std::to_string(state.task_id()) + " " + PhaseName(state.state()) +
                      (state.has_result()
                           ? " (exit " + std::to_string(state.result().exit_code()) + ", signal " +
                                 std::to_string(state.result().signal()) + ")"
                           : std::string()));
  r.json = JsonUint("task_id", state.task_id()) + JsonText("state", PhaseName(state.state())) +
           (state.has_result() ? ResultJson(state.result()) : std::string()) +
           JsonText("output", state.output());
  if (!wait) {
    r.ok = state.state() == TaskState::CANCELLED || state.state() == TaskState::DONE;
    if (!r.ok) r.error = std::string("cancel: task is ") + PhaseName(state.state());
  } else if (state.state() == TaskState::DONE) {
    r.ok = state.has_result() ? Judge(state.result(), &r.error) : false;
    if (!state.has_result()) r.error = "task failed to start: " + state.output();
  } else {
    r.error = std::string("task is ") + PhaseName(state.state());
  }
  return r;
}

// The local name a pulled file gets: LOCAL for one node, LOCAL.<node> for several.
std::string PullDestination(const CliOptions& o, const std::string& host, bool many) {
  if (!many) return o.local;
  std::string safe;
  for (char c : host)
    safe.push_back(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ? c : '_');
  return o.local + "." + safe;
}

}  // namespace

std::unique_ptr<grpc::ClientContext> MakeContext(const CallSettings& settings,
                                                 uint32_t timeout_ms) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  if (!settings.token.empty()) ctx->AddMetadata(kAuthMetadataKey, BearerHeader(settings.token));
  return ctx;
}

bool PullFile(Node::Stub* stub, const CallSettings& settings, const std::string& remote,
              const std::string& local, uint64_t* bytes, std::string* error) {
  auto ctx = MakeContext(settings, settings.timeout_ms);
  PullRequest req;
  req.set_path(remote);
  std::unique_ptr<grpc::ClientReader<FileChunk>> reader = stub->Pull(ctx.get(), req);
  Result<PartFile> part = PartFile::Create(local);
  if (!part.ok()) {
    *error = "pull: " + local + ".drpc-part: " + strerror(part.status().code());
    ctx->TryCancel();
    reader->Finish();
    return false;
  }
  FileChunk chunk;
  Checksum sum;
  uint64_t got = 0, size = 0;
  bool have_header = false, write_failed = false;
  while (reader->Read(&chunk)) {
    if (chunk.kind_case() == FileChunk::kHeader) {
      have_header = true;
      size = chunk.header().size();
      continue;
    }
    const std::string& d = chunk.data();
    size_t done = 0;
    while (done < d.size()) {
      const ssize_t n = ::write(part->fd(), d.data() + done, d.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        write_failed = true;
        break;
      }
      done += static_cast<size_t>(n);
    }
    if (write_failed) {
      *error = "pull: write " + part->temp() + ": " + strerror(errno);
      ctx->TryCancel();
      break;
    }
    sum.Update(d.data(), d.size());
    got += d.size();
  }
  grpc::Status s = reader->Finish();
  bool ok = !write_failed;
  if (ok && !s.ok()) {
    *error = "pull: " + DescribeStatus(s);
    ok = false;
  }
  if (ok && (!have_header || got != size)) {
    *error = "pull: received " + std::to_string(got) + " of " + std::to_string(size) + " bytes";
    ok = false;
  }
  if (ok) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, sum.value());
    auto it = ctx->GetServerTrailingMetadata().find(kChecksumTrailer);
    if (it == ctx->GetServerTrailingMetadata().end() ||
        std::string_view(it->second.data(), it->second.size()) != hex) {
      *error = "pull: checksum differs from the node's";
      ok = false;
    }
  }
  if (ok && !part->Commit(error)) {
    *error = "pull: " + *error;
    ok = false;
  }
  if (!ok) return false;
  *bytes = got;
  return true;
}

HostResult RunCommandOnHost(const CliOptions& o, const CallSettings& cs, const Target& target,
                            Output* out) {
  HostResult r;
  std::string error;
  ChannelInfo info;
  std::shared_ptr<grpc::Channel> channel =
      MakeChannel(target, cs.connect_timeout_ms, &error, &info);
  if (!channel) {
    r.error = error;
    return r;
  }
  std::unique_ptr<Node::Stub> stub = Node::NewStub(channel);
  const std::string& host = target.spec;
  switch (o.command) {
    case Command::kPing:
      return Ping(o, cs, stub.get(), info.mode, out, host);
    case Command::kExec:
      return Exec(o, cs, stub.get(), out, host);
    case Command::kStatus:
      return StatusCall(cs, stub.get(), out, host);
    case Command::kPush:
    case Command::kPull: {
      const Clock::time_point t0 = Clock::now();
      uint64_t bytes = 0;
      const bool push = o.command == Command::kPush;
      const std::string local = push ? o.local : PullDestination(o, host, cs.many_nodes);
      // A data connection unless asked otherwise or the node has none (an older drpcd).
      DataOutcome data = DataOutcome::kNotServed;
      if (!o.in_call) {
        data =
            push ? PushOnDataConnection(stub.get(), target, cs, o.local, o.remote, o.mode,
                                        o.overwrite, &bytes, &r.error)
                 : PullOnDataConnection(stub.get(), target, cs, o.remote, local, &bytes, &r.error);
      }
      if (data == DataOutcome::kFailed) return r;
      if (data == DataOutcome::kUnreachable) {
        out->Line(host, r.error + "; carrying the bytes in the call instead", true);
        r.error.clear();
      }
      const bool in_call = data != DataOutcome::kDone;
      const bool ok =
          !in_call ||
          (push ? PushFile(channel, cs, o.local, o.remote, o.mode, o.overwrite, &bytes, &r.error)
                : PullFile(stub.get(), cs, o.remote, local, &bytes, &r.error));
      if (!ok) return r;
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      const double mbps = s > 0 ? static_cast<double>(bytes) / 1e6 / s : 0;
      out->Line(host, std::string(push ? "pushed " : "pulled ") + std::to_string(bytes) +
                          " bytes " + (push ? "to " + o.remote : "into " + local) + " (" +
                          Fixed(mbps) + " MB/s, " + info.mode +
                          (in_call ? ", in the call)" : ", data connection)"));
      r.ok = true;
      r.json = JsonUint("bytes", bytes) + JsonNumber("mb_per_s", mbps) + JsonText("local", local) +
               JsonText("remote", o.remote) + JsonText("transport", info.mode) +
               JsonText("bytes_carried_by", in_call ? "call" : "data connection");
      return r;
    }
    case Command::kSubmit:
    case Command::kWait:
    case Command::kCancel:
      return TaskCall(o, cs, stub.get(), out, host);
  }
  r.error = "unknown command";
  return r;
}

}  // namespace san::drpc
