// Handover: moving a filed SAN channel to the process that accepted its TCP connection.
//
// A listener's rendezvous is served by the connection thread of the process that called listen()
// (the owner). When another process -- a fork child of a prefork server -- accepts a connection on
// the inherited listening socket, the channel the client set up is filed in the owner. The
// accepting process claims it: it asks the owner's control socket (control_service.h) for the
// channel by the connection's 4-tuple, and the owner exports the stream (proto::Stream::Export)
// and sends it over SCM_RIGHTS; the claimer imports it. If the owner has no channel for that tuple
// the client is a plain TCP client, and the connection stays kernel TCP on both ends.
//
// Reply on the control socket (fds ride on its first bytes):
//   HandoverHeader {magic "SANH", version, status (0 or errno), fd count, state lengths,
//                   stream parameters, buffers}  -- this build's layout: owner and claimer run the
//                   same library (a fork child), checked by version and sizes
//   endpoint state bytes, stream state bytes
//
// Thread-safety: plain functions; each uses only its own socket. Both sides bound every wait.
#pragma once

#include <memory>
#include <vector>

#include "sanlib/common/status.h"
#include "sanlib/fabric/provider.h"
#include "sanlib/proto/stream.h"
#include "sanlib/proto/wire.h"

namespace san {

// Receives exactly len bytes on a nonblocking-capable socket, waiting until deadline_ns at most,
// and takes every fd that comes with them into *fds (common/scm_rights.h). Also how the control
// service reads requests.
Status ReceiveExactly(int sock, void* out, size_t len, std::vector<UniqueFd>* fds,
                      uint64_t deadline_ns);
// Owner side, after reading a claim: sends `stream` (exported) to the claimer, or `error` if
// stream is null. On success the stream object must only be destroyed afterwards.
Status SendHandover(int sock, proto::Stream* stream, int error);
// Claimer side: asks process `owner_pid` for the channel of `tuple`, whose accepted socket
// `conn_fd` is sent along as proof (the owner checks its two addresses), and rebuilds it through
// `provider`. ENOENT: the owner
// has no such channel (a plain client); other codes: it failed. The owner must be that very
// process (SO_PEERCRED pid: a pid reused by a stranger cannot answer) of our uid or root.
Result<std::unique_ptr<proto::Stream>> ClaimFromOwner(int owner_pid, const proto::FourTuple& tuple,
                                                      int conn_fd, fabric::Provider& provider);

}  // namespace san
