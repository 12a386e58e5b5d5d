#include "rpcvia/via_client.h"

#include <san/san.h>

#include <cstring>
#include <mutex>
#include <new>

#include "rpcvia/deadline_connect.h"
#include "rpcvia/record_stream.h"
#include "rpcvia/rpcvia.h"
#include "sanlib/common/clock.h"

namespace san::rpcvia {
namespace {

char kNetid[] = "via";
constexpr int kAuthRefreshes = 2;

struct ViaClient {
  ViaClient(int fd, rpcprog_t p, rpcvers_t v, const ServerAddress& s)
      : stream(fd, 0, 0), prog(p), vers(v), server(s) {
    server_netbuf.buf = &server.addr;
    server_netbuf.len = server_netbuf.maxlen = server.len;
    uint32_t seed = 0;
    if (getentropy(&seed, sizeof seed) != 0) seed = static_cast<uint32_t>(NowNs());
    xid = seed;  // a reconnecting client must not reuse the xids of its previous incarnation
  }
  CLIENT client{};
  std::mutex lock;
  RecordStream stream;
  rpcprog_t prog;
  rpcvers_t vers;
  uint32_t xid;
  timeval timeout{};
  bool timeout_set = false;
  bool close_fd = true;
  ServerAddress server;
  netbuf server_netbuf{};
  rpc_err error{};
};

// xdr_void with the xdrproc_t signature (libtirpc declares it without arguments).
bool_t XdrNothing(XDR*, ...) { return TRUE; }

ViaClient* Of(CLIENT* cl) { return static_cast<ViaClient*>(cl->cl_private); }

bool TimevalValid(const timeval& tv) {
  return tv.tv_sec >= 0 && tv.tv_usec >= 0 && tv.tv_usec < 1000000;
}

// The transport's failure if it has one, else `otherwise`.
void SetError(ViaClient* c, enum clnt_stat otherwise) {
  c->error = rpc_err{};
  if (c->stream.error() != RPC_SUCCESS) {
    c->error.re_status = c->stream.error();
    c->error.re_errno = c->stream.error_errno();
  } else {
    c->error.re_status = otherwise;
  }
}

bool EncodeCall(CLIENT* cl, ViaClient* c, rpcproc_t proc, xdrproc_t xargs, void* args) {
  XDR* x = c->stream.xdr();
  x->x_op = XDR_ENCODE;
  rpc_msg call{};
  call.rm_xid = c->xid;
  call.rm_direction = CALL;
  call.rm_call.cb_rpcvers = RPC_MSG_VERSION;
  call.rm_call.cb_prog = c->prog;
  call.rm_call.cb_vers = c->vers;
  u_int32_t procedure = proc;
  return xdr_callhdr(x, &call) && xdr_u_int32_t(x, &procedure) && AUTH_MARSHALL(cl->cl_auth, x) &&
         AUTH_WRAP(cl->cl_auth, x, xargs, static_cast<caddr_t>(args));
}

// Reads records until the reply to c->xid; false (c->error set) if the stream failed.
bool AwaitReply(ViaClient* c, rpc_msg* reply) {
  XDR* x = c->stream.xdr();
  x->x_op = XDR_DECODE;
  for (;;) {
    *reply = rpc_msg{};
    reply->acpted_rply.ar_verf = _null_auth;
    reply->acpted_rply.ar_results.where = nullptr;
    reply->acpted_rply.ar_results.proc = XdrNothing;
    if (!xdrrec_skiprecord(x)) {
      SetError(c, RPC_CANTRECV);
      return false;
    }
    if (!xdr_replymsg(x, reply)) {
      if (c->stream.error() != RPC_SUCCESS) {
        SetError(c, RPC_CANTRECV);
        return false;
      }
      continue;  // not a reply we can read: skip the record
    }
    if (reply->rm_xid == c->xid) return true;
    // A late reply to a call that timed out: skip it.
  }
}

enum clnt_stat Call(CLIENT* cl, rpcproc_t proc, xdrproc_t xargs, void* args, xdrproc_t xresults,
                    void* results, timeval timeout) {
  ViaClient* c = Of(cl);
  std::lock_guard<std::mutex> hold(c->lock);
  const timeval wait = c->timeout_set ? c->timeout : timeout;
  if (!TimevalValid(wait)) {
    c->error = rpc_err{};
    c->error.re_status = RPC_SYSTEMERROR;
    c->error.re_errno = EINVAL;
    return c->error.re_status;
  }
  const bool one_way = wait.tv_sec == 0 && wait.tv_usec == 0;
  const uint64_t deadline = DeadlineAfter(wait);
  for (int refreshes = kAuthRefreshes;; --refreshes) {
    c->stream.ClearError();
    if (c->stream.dead()) {
      c->error = rpc_err{};
      c->error.re_status = RPC_CANTSEND;
      c->error.re_errno = ECONNRESET;
      return c->error.re_status;
    }
    // With no deadline for the send of a one-way call: it has to go out whole.
    c->stream.set_deadline(one_way ? RecordStream::kNoDeadline : deadline);
    ++c->xid;
    XDR* x = c->stream.xdr();
    if (!EncodeCall(cl, c, proc, xargs, args)) {
      SetError(c, RPC_CANTENCODEARGS);
      if (!c->stream.dead()) xdrrec_endofrecord(x, TRUE);  // keep the record framing intact
      return c->error.re_status;
    }
    if (!xdrrec_endofrecord(x, TRUE)) {
      SetError(c, RPC_CANTSEND);
      return c->error.re_status;
    }
    if (one_way) {
      c->error = rpc_err{};
      c->error.re_status = RPC_TIMEDOUT;
      return RPC_TIMEDOUT;
    }
    rpc_msg reply;
    if (!AwaitReply(c, &reply)) return c->error.re_status;
    c->error = rpc_err{};
    _seterr_reply(&reply, &c->error);
    if (c->error.re_status == RPC_SUCCESS) {
      if (!AUTH_VALIDATE(cl->cl_auth, &reply.acpted_rply.ar_verf)) {
        c->error.re_status = RPC_AUTHERROR;
        c->error.re_why = AUTH_INVALIDRESP;
      } else if (!AUTH_UNWRAP(cl->cl_auth, x, xresults, static_cast<caddr_t>(results))) {
        SetError(c, RPC_CANTDECODERES);
      }
      if (reply.acpted_rply.ar_verf.oa_base != nullptr) {
        x->x_op = XDR_FREE;
        xdr_opaque_auth(x, &reply.acpted_rply.ar_verf);
      }
      return c->error.re_status;
    }
    if (c->error.re_status != RPC_AUTHERROR || refreshes <= 0 ||
        !AUTH_REFRESH(cl->cl_auth, &reply)) {
      return c->error.re_status;
    }
  }
}

void Abort(CLIENT*) {}

void GetError(CLIENT* cl, rpc_err* out) {
  ViaClient* c = Of(cl);
  std::lock_guard<std::mutex> hold(c->lock);
  *out = c->error;
}

bool_t FreeResults(CLIENT*, xdrproc_t xresults, void* results) {
  XDR x{};
  x.x_op = XDR_FREE;
  return xresults(&x, results);
}

void Destroy(CLIENT* cl) {
  ViaClient* c = Of(cl);
  const int fd = c->stream.fd();
  const bool close_fd = c->close_fd;
  delete c;
  if (close_fd) san_close(fd);
}

template <typename T>
bool Copy(const T& from, void* to) {
  std::memcpy(to, &from, sizeof from);
  return true;
}

template <typename T>
T Read(const void* from) {
  T value;
  std::memcpy(&value, from, sizeof value);
  return value;
}

bool_t Control(CLIENT* cl, u_int request, void* info) {
  ViaClient* c = Of(cl);
  std::lock_guard<std::mutex> hold(c->lock);
  switch (request) {
    case CLSET_FD_CLOSE:
      c->close_fd = true;
      return TRUE;
    case CLSET_FD_NCLOSE:
      c->close_fd = false;
      return TRUE;
    default:
      break;
  }
  if (info == nullptr) return FALSE;
  switch (request) {
    case CLSET_TIMEOUT: {
      const timeval tv = Read<timeval>(info);
      if (!TimevalValid(tv)) return FALSE;
      c->timeout = tv;
      c->timeout_set = true;
      return TRUE;
    }
    case CLGET_TIMEOUT:
      return Copy(c->timeout, info);
    case CLGET_SERVER_ADDR:
      std::memcpy(info, &c->server.addr, c->server.len);
      return TRUE;
    case CLGET_SVC_ADDR:
      return Copy(c->server_netbuf, info);  // its buf is the CLIENT's: not for the caller to free
    case CLGET_FD:
      return Copy(c->stream.fd(), info);
    case CLGET_XID:
      return Copy(static_cast<u_int32_t>(c->xid), info);
    case CLSET_XID:
      c->xid = Read<u_int32_t>(info) - 1;  // the next call carries this xid
      return TRUE;
    case CLGET_VERS:
      return Copy(static_cast<u_int32_t>(c->vers), info);
    case CLSET_VERS:
      c->vers = Read<u_int32_t>(info);
      return TRUE;
    case CLGET_PROG:
      return Copy(static_cast<u_int32_t>(c->prog), info);
    case CLSET_PROG:
      c->prog = Read<u_int32_t>(info);
      return TRUE;
    case CLGET_VIA_MODE: {
      san_info si{};
      if (san_getinfo(c->stream.fd(), &si) != 0) return FALSE;
      return Copy(si.mode, info);
    }
    default:
      return FALSE;
  }
}

__rpc_client::clnt_ops kViaOps = {Call, Abort, GetError, FreeResults, Destroy, Control};

}  // namespace

CLIENT* CreateViaClient(int fd, rpcprog_t prog, rpcvers_t vers, const ServerAddress& server) {
  auto* c = new (std::nothrow) ViaClient(fd, prog, vers, server);
  if (c == nullptr) return nullptr;
  c->client.cl_auth = authnone_create();
  c->client.cl_ops = &kViaOps;
  c->client.cl_private = c;
  c->client.cl_netid = kNetid;
  c->client.cl_tp = kNetid;
  return &c->client;
}

}  // namespace san::rpcvia
