// Push and Pull on the node with the bytes in the call's messages (FileChunk streams): what any
// gRPC client (grpcio, grpcurl) uses. drpc's own client prefers a data connection
// (node/data_transfer.h) and falls back to these against an older node.
//
// Files are opened and committed by node/node_file.h (jailed paths, temporary + rename).
// Pull sends the size in a header, then the bytes, and the CRC-32C checksum in trailing metadata
// ("drpc-checksum", 16 hex digits); Push's summary carries the checksum of what was written.
// Thread-safety: concurrent calls are independent (the Jail is read-only).
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "drpc/node/node_file.h"
#include "drpc/proto/drpc_proto.h"
#include "drpc/proto/transfer.h"
#include "files/jail.h"

namespace san::drpc {

grpc::Status ReceivePush(const san::files::Jail& jail, grpc::ServerContext* context,
                         grpc::ServerReader<FileChunk>* reader, PushSummary* summary);
grpc::Status SendPull(const san::files::Jail& jail, grpc::ServerContext* context,
                      const PullRequest& request, grpc::ServerWriter<FileChunk>* writer);

}  // namespace san::drpc
