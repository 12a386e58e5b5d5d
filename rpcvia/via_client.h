// The via CLIENT: libtirpc's client interface (clnt_call, clnt_control, clnt_geterr, clnt_freeres,
// clnt_destroy) carried over a connected sanlib socket with RFC 5531 record marking -- the part of
// SOVIA's modified RPC library that sends calls over the SAN instead of the kernel's TCP.
//
// Calls follow libtirpc's "tcp" client: the per-call timeout unless CLSET_TIMEOUT set one, a zero
// timeout sends without waiting (RPC_TIMEDOUT, as for batched calls), replies with another xid
// are skipped, a reply that does not decode is skipped (a hostile server cannot make us read past
// the call's deadline), AUTH_ERROR replies get two refreshes.
// Thread-safety: calls on one CLIENT are serialised by its own lock.
// Ownership: the CLIENT owns the socket unless CLSET_FD_NCLOSE; clnt_destroy frees everything
// but cl_auth (as libtirpc: the caller destroys the AUTH it installed).
#pragma once

#include <rpc/rpc.h>

#include "rpcvia/rpcbind_lookup.h"

namespace san::rpcvia {

// `fd`: a connected SAN socket in O_NONBLOCK mode (ownership passes to the CLIENT). Never fails
// short of memory exhaustion.
CLIENT* CreateViaClient(int fd, rpcprog_t prog, rpcvers_t vers, const ServerAddress& server);

}  // namespace san::rpcvia
