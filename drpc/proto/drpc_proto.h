// The generated drpc.proto types (package drpc, so ::drpc::...) brought into san::drpc, where
// the rest of the toolkit lives: the wire name of the service stays "drpc.Node" for outside
// clients (grpcio, grpcurl) while our code names them unqualified.
// Thread-safety: as generated (messages are values; stubs are thread-safe).
#pragma once

#include "drpc.grpc.pb.h"
#include "drpc.pb.h"

namespace san::drpc {

using ::drpc::DataOffer;
using ::drpc::ExecChunk;
using ::drpc::ExecRequest;
using ::drpc::ExecResult;
using ::drpc::FileChunk;
using ::drpc::FileHeader;
using ::drpc::Node;
using ::drpc::PingReply;
using ::drpc::PingRequest;
using ::drpc::PullRequest;
using ::drpc::PushSummary;
using ::drpc::StatusReply;
using ::drpc::StatusRequest;
using ::drpc::SubmitReply;
using ::drpc::SubmitRequest;
using ::drpc::TaskRef;
using ::drpc::TaskState;
using ::drpc::TransferEvent;
using ::drpc::TransferRequest;

}  // namespace san::drpc
