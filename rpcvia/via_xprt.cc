#include "rpcvia/via_xprt.h"

#include <netinet/in.h>
#include <rpc/svc_mt.h>
#include <san/san.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "rpcvia/record_stream.h"
#include "sanlib/common/clock.h"

namespace san::rpcvia {
namespace {

constexpr uint64_t kRestOfRequestNs = 35ull * 1000000000u;
constexpr int kBacklog = SOMAXCONN;
char kNetid[] = "tcp";  // what rpcbind and svc_getrpccaller users know this transport as

// Everything an SVCXPRT of ours points to. xp_p1 -> this; xp_p3 -> ext (libtirpc's per-transport
// authentication state, SVC_XP_AUTH).
struct ViaXprt {
  static ViaXprt* Listener(int fd) {
    auto* v = new (std::nothrow) ViaXprt;
    if (v != nullptr) v->listen_fd = fd;
    return v;
  }
  static ViaXprt* Connection(int fd) {
    auto* v = new (std::nothrow) ViaXprt;
    if (v != nullptr) v->stream.reset(new (std::nothrow) RecordStream(fd, 0, 0));
    if (v != nullptr && !v->stream) {
      delete v;
      return nullptr;
    }
    return v;
  }
  ~ViaXprt() {
    std::free(xprt.xp_ltaddr.buf);
    std::free(xprt.xp_rtaddr.buf);
  }
  int fd() const { return stream ? stream->fd() : listen_fd; }

  SVCXPRT xprt{};
  SVCXPRT_EXT ext{};
  int listen_fd = -1;
  std::unique_ptr<RecordStream> stream;  // connection transports only
  u_int32_t xid = 0;                     // of the call being served
};

// xdr_void with the xdrproc_t signature (libtirpc declares it without arguments).
bool_t XdrNothing(XDR*, ...) { return TRUE; }

ViaXprt* Of(SVCXPRT* x) { return static_cast<ViaXprt*>(x->xp_p1); }

bool SetNetbuf(netbuf* nb, const sockaddr_storage& addr, socklen_t len) {
  void* buf = std::malloc(sizeof addr);
  if (buf == nullptr) return false;
  std::memcpy(buf, &addr, sizeof addr);
  nb->buf = buf;
  nb->len = len;
  nb->maxlen = sizeof addr;
  return true;
}

void Destroy(SVCXPRT* x) {
  ViaXprt* v = Of(x);
  xprt_unregister(x);
  const int fd = v->fd();
  delete v;
  san_close(fd);
}

bool_t Control(SVCXPRT* x, const u_int request, void* info) {
  ViaXprt* v = Of(x);
  switch (request) {
    case SVCGET_VERSQUIET:
      *static_cast<int*>(info) = v->ext.flags & SVC_VERSQUIET;
      return TRUE;
    case SVCSET_VERSQUIET:
      if (*static_cast<int*>(info)) {
        v->ext.flags |= SVC_VERSQUIET;
      } else {
        v->ext.flags &= ~SVC_VERSQUIET;
      }
      return TRUE;
    default:
      return FALSE;
  }
}

const struct __rpc_svcxprt::xp_ops2 kOps2 = {Control};

// ---- connection transport ----------------------------------------------------------------------

bool_t ConnRecv(SVCXPRT* x, rpc_msg* msg) {
  ViaXprt* v = Of(x);
  v->stream->ClearError();
  v->stream->set_deadline(NowNs() + kRestOfRequestNs);
  XDR* xdr = v->stream->xdr();
  xdr->x_op = XDR_DECODE;
  if (xdrrec_skiprecord(xdr) && xdr_callmsg(xdr, msg)) {
    v->xid = msg->rm_xid;
    return TRUE;
  }
  // Closed, broken, silent for too long, or not an RPC call: nothing on this connection can be
  // trusted to line up again.
  v->stream->set_dead();
  return FALSE;
}

xprt_stat ConnStat(SVCXPRT* x) {
  ViaXprt* v = Of(x);
  if (v->stream->dead()) return XPRT_DIED;
  return xdrrec_eof(v->stream->xdr()) ? XPRT_IDLE : XPRT_MOREREQS;
}

bool_t ConnFreeArgs(SVCXPRT*, xdrproc_t xargs, void* args) {
  XDR free_xdr{};
  free_xdr.x_op = XDR_FREE;
  return xargs(&free_xdr, args);
}

bool_t ConnGetArgs(SVCXPRT* x, xdrproc_t xargs, void* args) {
  ViaXprt* v = Of(x);
  if (SVCAUTH_UNWRAP(&SVC_XP_AUTH(x), v->stream->xdr(), xargs, static_cast<caddr_t>(args))) {
    return TRUE;
  }
  ConnFreeArgs(x, xargs, args);  // what was decoded before the failure
  return FALSE;
}

bool_t ConnReply(SVCXPRT* x, rpc_msg* msg) {
  ViaXprt* v = Of(x);
  XDR* xdr = v->stream->xdr();
  // The results go through the authentication flavour's wrap (RPCSEC_GSS integrity/privacy).
  xdrproc_t results_proc = nullptr;
  caddr_t results = nullptr;
  const bool has_results =
      msg->rm_reply.rp_stat == MSG_ACCEPTED && msg->acpted_rply.ar_stat == SUCCESS;
  if (has_results) {
    results_proc = msg->acpted_rply.ar_results.proc;
    results = msg->acpted_rply.ar_results.where;
    msg->acpted_rply.ar_results.proc = XdrNothing;
    msg->acpted_rply.ar_results.where = nullptr;
  }
  v->stream->ClearError();
  v->stream->set_deadline(NowNs() + kRestOfRequestNs);
  xdr->x_op = XDR_ENCODE;
  msg->rm_xid = v->xid;
  bool ok = xdr_replymsg(xdr, msg) &&
            (!has_results || SVCAUTH_WRAP(&SVC_XP_AUTH(x), xdr, results_proc, results));
  ok = xdrrec_endofrecord(xdr, TRUE) && ok;
  if (v->stream->error() != RPC_SUCCESS) v->stream->set_dead();  // a client that does not read
  if (has_results) {                                             // the caller's message as it was
    msg->acpted_rply.ar_results.proc = results_proc;
    msg->acpted_rply.ar_results.where = results;
  }
  return ok;
}

const struct __rpc_svcxprt::xp_ops kConnOps = {ConnRecv,  ConnStat,     ConnGetArgs,
                                               ConnReply, ConnFreeArgs, Destroy};

// ---- rendezvous transport ----------------------------------------------------------------------

ViaXprt* NewTransport(ViaXprt* v, const struct __rpc_svcxprt::xp_ops* ops, int fd) {
  SVCXPRT* x = &v->xprt;
  x->xp_fd = fd;
  x->xp_ops = ops;
  x->xp_ops2 = &kOps2;
  x->xp_p1 = v;
  x->xp_p3 = &v->ext;
  x->xp_netid = kNetid;
  x->xp_tp = nullptr;
  x->xp_type = NC_TPI_COTS_ORD;
  x->xp_verf = _null_auth;
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (san_getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      !SetNetbuf(&x->xp_ltaddr, local, len)) {
    return nullptr;
  }
  x->xp_port = ntohs(reinterpret_cast<const sockaddr_in*>(&local)->sin_port);
  return v;
}

bool_t RendezvousRecv(SVCXPRT* x, rpc_msg*) {
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  const int fd = san_accept4(Of(x)->listen_fd, reinterpret_cast<sockaddr*>(&peer), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return FALSE;  // EAGAIN (another process took it), ECONNABORTED, EMFILE...
  ViaXprt* v = ViaXprt::Connection(fd);
  if (v == nullptr || !NewTransport(v, &kConnOps, fd) ||
      !SetNetbuf(&v->xprt.xp_rtaddr, peer, len)) {
    delete v;
    san_close(fd);
    return FALSE;
  }
  std::memcpy(&v->xprt.xp_raddr, &peer, std::min<size_t>(len, sizeof v->xprt.xp_raddr));
  v->xprt.xp_addrlen = static_cast<int>(len);
  xprt_register(&v->xprt);
  return FALSE;  // no message on a rendezvous
}

xprt_stat RendezvousStat(SVCXPRT*) { return XPRT_IDLE; }
bool_t RendezvousGetArgs(SVCXPRT*, xdrproc_t, void*) { return FALSE; }
bool_t RendezvousReply(SVCXPRT*, rpc_msg*) { return FALSE; }

const struct __rpc_svcxprt::xp_ops kRendezvousOps = {
    RendezvousRecv, RendezvousStat, RendezvousGetArgs, RendezvousReply, RendezvousGetArgs, Destroy};

}  // namespace

SVCXPRT* CreateViaRendezvous() {
  const int fd = san_socket(AF_INET, SOCK_SAN | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  ViaXprt* v = ViaXprt::Listener(fd);
  if (san_bind(fd, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
      san_listen(fd, kBacklog) != 0 || v == nullptr || !NewTransport(v, &kRendezvousOps, fd)) {
    const int err = v == nullptr ? ENOMEM : errno;
    delete v;
    san_close(fd);
    errno = err;
    return nullptr;
  }
  xprt_register(&v->xprt);
  return &v->xprt;
}

}  // namespace san::rpcvia
