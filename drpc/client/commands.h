// The drpc CLI's commands against one node: each makes a channel (transport/channel.h), calls,
// prints (Output) and returns the node's HostResult. A node that cannot be reached, refuses, or
// whose command fails (non-zero exit, signal, timeout) is a failed node, with the reason.
// Also the few calls the benchmark and tests make directly (PingOnce, PushFile in
// client/file_push.h).
// Thread-safety: RunCommandOnHost may run concurrently for different nodes.
#pragma once

#include <grpcpp/client_context.h>

#include <memory>
#include <string>

#include "drpc/client/fanout.h"
#include "drpc/client/file_push.h"
#include "drpc/client/output.h"
#include "drpc/core/cli_options.h"
#include "drpc/proto/drpc_proto.h"

namespace san::drpc {

struct CallSettings {
  std::string token;  // "" = send none
  uint32_t timeout_ms = 30000;
  uint32_t connect_timeout_ms = 3000;
  bool many_nodes = false;  // pull: LOCAL.<node> instead of LOCAL
};

HostResult RunCommandOnHost(const CliOptions& options, const CallSettings& settings,
                            const Target& target, Output* out);

// A ClientContext with the token and a deadline timeout_ms from now.
std::unique_ptr<grpc::ClientContext> MakeContext(const CallSettings& settings, uint32_t timeout_ms);

// "CODE: message", e.g. "PERMISSION_DENIED: push: '..' in the path".
std::string DescribeStatus(const grpc::Status& s);

// Fetches remote into local (temporary name, renamed when size and checksum match).
bool PullFile(Node::Stub* stub, const CallSettings& settings, const std::string& remote,
              const std::string& local, uint64_t* bytes, std::string* error);

}  // namespace san::drpc
