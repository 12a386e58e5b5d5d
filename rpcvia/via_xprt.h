// The via service transports: libtirpc's SVCXPRT interface over sanlib sockets.
//
// A rendezvous transport owns a SAN listening socket; when svc_run finds it readable it accepts
// one connection and registers a connection transport for it (xprt_register), as libtirpc's
// svc_vc does. A connection transport reads calls and writes replies with RFC 5531 record marking
// over the accepted socket -- the SAN path when the client is a sanlib client on this host, kernel
// TCP when it is anybody else (rpcinfo, a system-rpcgen client): the listener serves both.
// Reads of a request that has started wait at most 35 s for the rest (libtirpc's bound);
// a connection whose peer closes, breaks or sends something that is not an RPC call is destroyed
// by svc_getreq (XPRT_DIED) and nothing else is affected.
// Thread-safety: for the thread running the service loop, like every SVCXPRT.
// Ownership: each SVCXPRT owns its socket and memory; SVC_DESTROY releases them.
#pragma once

#include <rpc/rpc.h>

namespace san::rpcvia {

// Binds a SAN listening socket to the wildcard address (IPv4, a port the kernel picks) and makes
// its rendezvous transport, registered with svc_run's poll set. nullptr with errno on failure.
SVCXPRT* CreateViaRendezvous();

}  // namespace san::rpcvia
