// Node.Transfer on the node: Push and Pull with the file's bytes on a data connection of their
// own (docs/drpc.md "Data connections"), which drpc's client prefers to the in-call streams of
// node/file_transfer.h.
//
// The call: the request names the file and the direction; the node opens it (node/node_file.h:
// jailed paths, a pushed file goes to a temporary), listens on a fresh port of its listen address
// (a SAN listener: a sanlib client gets shared memory, any other a kernel TCP connection), and
// answers with an offer -- that port and a 16-byte random ticket. The first connection that
// starts with the ticket is the data connection; others (a wrong ticket, nothing within 5 s) are
// closed, and after kMaxWrongConnections of them the transfer fails. The listener is closed once
// the data connection is in. Push: the node receives until the client closes, exactly the
// announced size, commits the file and reports. Pull: the node sends the file and closes; then
// reports. Every wait ends with the call (cancelled, deadline) or after 30 s without progress.
// Thread-safety: concurrent calls are independent (each its own listener and file).
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include <string>

#include "drpc/proto/drpc_proto.h"
#include "drpc/proto/transfer.h"
#include "files/jail.h"

namespace san::drpc {

inline constexpr int kMaxWrongConnections = 8;

// listen_host: the address the node's gRPC listener is bound to ("0.0.0.0", "127.0.0.1", ...).
grpc::Status ServeTransfer(const san::files::Jail& jail, const std::string& listen_host,
                           grpc::ServerContext* context, const TransferRequest& request,
                           grpc::ServerWriter<TransferEvent>* writer);

}  // namespace san::drpc
