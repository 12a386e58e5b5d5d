// drpc's client side of Node.Transfer: Push and Pull with the file's bytes on a data connection
// beside the call (node/data_transfer.h, docs/drpc.md "Data connections"), the CLI's default.
//
// The call is started, the node's offer read, a data connection opened to the offered port on the
// target's host -- a SAN socket for a san:// target, kernel TCP otherwise, like the channel --
// and the ticket sent first. Push then sends the file with san_sendfile and closes; pull receives
// into LOCAL.drpc-part with san_recvfile until the node closes (client/part_file.h), and is
// renamed into place once the size matches the offer and the node's summary. The node's summary
// must agree on the byte count. If the data connection fails, the call's own status (e.g. the
// node's "no space left") is reported when there is one, else the data connection's error.
// Waits end at the call's deadline (settings.timeout_ms) or after 30 s without progress.
// A node without Transfer (an older drpcd: UNIMPLEMENTED) gives kNotServed, and an offered port
// this client cannot connect to (a firewall or NAT passing only the gRPC port) gives
// kUnreachable with *error saying why; in both nothing has moved (the call was cancelled), and
// the caller uses the in-call stream (PushFile / PullFile).
// Thread-safety: concurrent transfers are independent.
#pragma once

#include <cstdint>
#include <string>

#include "drpc/core/target.h"
#include "drpc/proto/drpc_proto.h"

namespace san::drpc {

struct CallSettings;

enum class DataOutcome { kDone, kFailed, kNotServed, kUnreachable };

DataOutcome PushOnDataConnection(Node::Stub* stub, const Target& target,
                                 const CallSettings& settings, const std::string& local,
                                 const std::string& remote, uint32_t mode, bool overwrite,
                                 uint64_t* bytes, std::string* error);
DataOutcome PullOnDataConnection(Node::Stub* stub, const Target& target,
                                 const CallSettings& settings, const std::string& remote,
                                 const std::string& local, uint64_t* bytes, std::string* error);

}  // namespace san::drpc
