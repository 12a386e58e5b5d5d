// Push and Pull on the node: files moved inside the node's file root only.
//
// Paths are checked by CanonicalRemotePath (no "..", no NUL) and opened through ftpd's Jail
// (openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so neither a name nor a symlink inside the
// root leads out of it. A pushed file is written to a hidden temporary name in the target's
// directory and renamed into place only when every byte the header announced arrived: a broken
// Push leaves nothing behind and never a half-written file under the real name. Without
// `overwrite` an existing file is kept (ALREADY_EXISTS). The target's directory must exist.
// Pull sends the size in a header, then the bytes, and the CRC-32C checksum in trailing metadata
// ("drpc-checksum", 16 hex digits).
// Thread-safety: concurrent calls are independent (the Jail is read-only).
#pragma once

#include <grpcpp/server_context.h>
#include <grpcpp/support/sync_stream.h>

#include "fs/jail.h"
#include "proto/drpc_proto.h"

namespace san::drpc {

inline constexpr size_t kFileChunkBytes = 256 * 1024;
inline constexpr char kChecksumTrailer[] = "drpc-checksum";

grpc::Status ReceivePush(const san::ftp::Jail& jail, grpc::ServerContext* context,
                         grpc::ServerReader<FileChunk>* reader, PushSummary* summary);
grpc::Status SendPull(const san::ftp::Jail& jail, grpc::ServerContext* context,
                      const PullRequest& request, grpc::ServerWriter<FileChunk>* writer);

// errno -> the gRPC code a client should see (ENOENT NOT_FOUND, EEXIST ALREADY_EXISTS,
// EPERM/EACCES/EXDEV/ELOOP PERMISSION_DENIED, EINVAL/EISDIR/ENOTDIR INVALID_ARGUMENT, ...).
grpc::Status FromSanStatus(const Status& s);

}  // namespace san::drpc
