// libtirpc's own clnt_create, clnt_create_timed and svc_create, for librpcvia to hand every
// nettype but "via" on to.
//
// librpcvia exports functions of those names (nettype_hook.cc), so that a program linked with
// -lrpcvia before -ltirpc reaches the via transport by the nettype string alone; a plain call
// from inside the library would therefore come back to us. These go to libtirpc's definitions,
// found once by symbol version in the libtirpc this process has loaded (dlvsym).
//
// Thread-safety: the lookup happens once (function-local statics); the calls are libtirpc's.
// If libtirpc's symbols cannot be found (never expected: librpcvia links libtirpc), the calls
// fail as libtirpc would for an unknown transport (rpc_createerr RPC_UNKNOWNPROTO; 0).
#pragma once

#include <rpc/rpc.h>

namespace san::rpcvia::tirpc {

CLIENT* ClntCreate(const char* host, rpcprog_t prog, rpcvers_t vers, const char* nettype);
CLIENT* ClntCreateTimed(const char* host, rpcprog_t prog, rpcvers_t vers, const char* nettype,
                        const timeval* timeout);
int SvcCreate(void (*dispatch)(svc_req*, SVCXPRT*), rpcprog_t prog, rpcvers_t vers,
              const char* nettype);

}  // namespace san::rpcvia::tirpc
