/* librpcvia: the "via" transport for ONC RPC (libtirpc) over sanlib sockets.
 *
 * clnt_create(host, PROG, VERS, "via") returns a CLIENT whose calls run over a SAN connection
 * (shared memory on this host), found through rpcbind like a "tcp" client; svc_create(dispatch,
 * PROG, VERS, "via") makes a listener that serves SAN clients over the SAN path and plain TCP
 * clients (rpcinfo, a system-rpcgen client) over TCP, registered with rpcbind as the program's
 * "tcp" address. Every other nettype goes to libtirpc unchanged.
 *
 * Linking is enough: librpcvia also defines clnt_create, clnt_create_timed, svc_create and
 * svc_run, so a program linked with -lrpcvia ahead of -ltirpc (pkg-config rpcvia gives that
 * order) selects the transport by the nettype string alone, whatever generated its stubs.
 * Including this header (rpcgen_via's generated headers do when RPCGEN_VIA_TRANSPORT is defined)
 * also maps those four names to the rpcvia_ versions at compile time, which holds whatever the
 * link order.
 *
 * Fallback: a via client whose server is not SAN-capable (or not on this host) talks TCP to it,
 * unless RPCVIA_FALLBACK=fail is in the environment or rpcvia_set_fallback(RPCVIA_FALLBACK_FAIL)
 * was called: then clnt_create fails (rpc_createerr: RPC_SYSTEMERROR, EPROTONOSUPPORT) and
 * rpcvia_create_detail() says why.
 *
 * Thread-safety: as libtirpc's tcp transport -- one CLIENT may be used by several threads (calls
 * are serialised); svc_* functions are for the thread that runs the service loop. */
#ifndef RPCVIA_RPCVIA_H
#define RPCVIA_RPCVIA_H

#include <rpc/rpc.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The nettype this library adds. */
#define RPCVIA_NETTYPE "via"

CLIENT* rpcvia_clnt_create(const char* host, rpcprog_t prog, rpcvers_t vers, const char* nettype);
CLIENT* rpcvia_clnt_create_timed(const char* host, rpcprog_t prog, rpcvers_t vers,
                                 const char* nettype, const struct timeval* timeout);
int rpcvia_svc_create(void (*dispatch)(struct svc_req*, SVCXPRT*), rpcprog_t prog, rpcvers_t vers,
                      const char* nettype);
/* svc_run() for a process serving via: waits on SAN sockets and kernel fds alike. */
void rpcvia_svc_run(void);

enum rpcvia_fallback { RPCVIA_FALLBACK_TCP = 0, RPCVIA_FALLBACK_FAIL = 1 };
/* Process-wide; overrides RPCVIA_FALLBACK. */
void rpcvia_set_fallback(enum rpcvia_fallback policy);

/* Why the last rpcvia_clnt_create in this thread failed or fell back to TCP ("" if it ran over the
 * SAN path); valid until the next create in this thread. */
const char* rpcvia_create_detail(void);

/* clnt_control() requests of via clients, beside libtirpc's CLSET_* / CLGET_*. */
#define CLGET_VIA_MODE 0x7600 /* int: 2 shm, 3 verbs, 1 tcp (enum san_mode of <san/san.h>) */

#ifndef RPCVIA_NO_MAPPING
#undef clnt_create
#undef clnt_create_timed
#undef svc_create
#undef svc_run
#define clnt_create(host, prog, vers, nettype) rpcvia_clnt_create((host), (prog), (vers), (nettype))
#define clnt_create_timed(host, prog, vers, nettype, tv) \
  rpcvia_clnt_create_timed((host), (prog), (vers), (nettype), (tv))
#define svc_create(dispatch, prog, vers, nettype) \
  rpcvia_svc_create((dispatch), (prog), (vers), (nettype))
#define svc_run() rpcvia_svc_run()
#endif

#ifdef __cplusplus
}
#endif

#endif /* RPCVIA_RPCVIA_H */
