// PushFile: the client side of Node.Push, sending the file's bytes without copying them in
// user space after read().
//
// What the generated stub would cost: each 256 KiB FileChunk is serialized by protobuf into a
// new gRPC slice (a copy of the chunk), and the std::string it was read into is allocated and
// zero-filled per chunk. Here each data message is a grpc::ByteBuffer of two slices: the
// FileChunk framing (field 2, length-delimited: tag 0x12 and a varint length, the exact bytes
// protobuf writes) and the malloc'd buffer read() filled, which gRPC frees once it has written it.
// The call is a generic (ByteBuffer) call on "/drpc.Node/Push" driven on a completion queue of
// our own: the same bytes on the wire as the generated stub's, and the next chunk is read and
// checksummed while gRPC sends the previous one. The node's reply is parsed as a PushSummary.
// Measured (`perf record`, release, 145 MB): the serialize copy and the zero-fill were 7-9 % of
// the client's CPU over SAN and TCP alike.
// Thread-safety: concurrent pushes are independent (each has its own queue and call).
#pragma once

#include <grpcpp/channel.h>

#include <cstdint>
#include <memory>
#include <string>

#include "drpc/proto/drpc_proto.h"
#include "sanlib/common/unique_fd.h"

namespace san::drpc {

struct CallSettings;

inline constexpr char kPushMethod[] = "/drpc.Node/Push";

// The local side of any push: opens local (a regular file) and fills the header announcing it
// to the node (path remote, mode, overwrite, size). On failure returns false, *error
// "push: LOCAL: ...".
bool OpenLocalPush(const std::string& local, const std::string& remote, uint32_t mode,
                   bool overwrite, UniqueFd* in, FileHeader* header, std::string* error);

// Streams the local file to remote on the channel's node and checks the summary (bytes,
// checksum). On failure returns false and sets *error. *bytes gets the file's size.
bool PushFile(const std::shared_ptr<grpc::Channel>& channel, const CallSettings& settings,
              const std::string& local, const std::string& remote, uint32_t mode, bool overwrite,
              uint64_t* bytes, std::string* error);

}  // namespace san::drpc
