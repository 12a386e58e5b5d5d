// "via" with no source change: librpcvia exports libtirpc's clnt_create, clnt_create_timed,
// svc_create and svc_run under their own names, so a program linked with -lrpcvia ahead of
// -ltirpc (`cc prog_clnt.c prog_xdr.c client.c -lrpcvia -lsan -ltirpc`, or pkg-config rpcvia)
// binds its calls here: "via" gets our transport, every other nettype goes on to libtirpc
// (tirpc_calls.h). Code built with -DRPCGEN_VIA_TRANSPORT, or including <rpcvia/rpcvia.h>, calls
// the rpcvia_* functions directly and does not depend on the link order (docs/rpcvia.md).
#define RPCVIA_NO_MAPPING  // defines the plain names themselves
#include "rpcvia/rpcvia.h"

extern "C" {

CLIENT* clnt_create(const char* host, rpcprog_t prog, rpcvers_t vers, const char* nettype) {
  return rpcvia_clnt_create(host, prog, vers, nettype);
}

CLIENT* clnt_create_timed(const char* host, rpcprog_t prog, rpcvers_t vers, const char* nettype,
                          const struct timeval* timeout) {
  return rpcvia_clnt_create_timed(host, prog, vers, nettype, timeout);
}

int svc_create(void (*dispatch)(struct svc_req*, SVCXPRT*), rpcprog_t prog, rpcvers_t vers,
               const char* nettype) {
  return rpcvia_svc_create(dispatch, prog, vers, nettype);
}

// svc_run() must wait with san_poll: a via connection's data arrives over shared memory, which
// no kernel poll() sees.
void svc_run(void) { rpcvia_svc_run(); }

}  // extern "C"
