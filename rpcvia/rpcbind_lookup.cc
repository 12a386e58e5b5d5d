#include "rpcvia/rpcbind_lookup.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <rpc/rpcb_prot.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "rpcvia/deadline_connect.h"
#include "sanlib/common/clock.h"

namespace san::rpcvia {
namespace {

constexpr uint16_t kRpcbindPort = 111;

struct NetconfigDeleter {
  void operator()(netconfig* n) const { freenetconfigent(n); }
};
using NetconfigPtr = std::unique_ptr<netconfig, NetconfigDeleter>;

struct ClientDeleter {
  void operator()(CLIENT* c) const { CLNT_DESTROY(c); }
};
using ClientPtr = std::unique_ptr<CLIENT, ClientDeleter>;

timeval Remaining(uint64_t deadline_ns) {
  const uint64_t now = NowNs();
  const uint64_t left = deadline_ns > now ? deadline_ns - now : 0;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(left / 1000000000u);
  tv.tv_usec = static_cast<suseconds_t>((left % 1000000000u) / 1000);
  if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1;  // 0 would mean "do not wait for a reply"
  return tv;
}

bool IsWildcard(const sockaddr_storage& a) {
  const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
  return a.ss_family == AF_INET && in->sin_addr.s_addr == htonl(INADDR_ANY);
}

// A kernel TCP connection to `addr` made by the deadline (rpcbind answers GETADDR for the netid
// of the transport the question came in on, so a tcp address must be asked for over TCP). -1 with
// errno on failure.
int ConnectTcpBy(const sockaddr_in& addr, uint64_t deadline_ns) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int err = ConnectBy(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr, deadline_ns);
  if (err == 0) {
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) err = errno;
  }
  if (err != 0) {
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// Asks one rpcbind at `rpcbind_addr` (port 111). False with `error` set on failure.
bool AskRpcbind(const sockaddr_in& rpcbind_addr, netconfig* tcp, rpcprog_t prog, rpcvers_t vers,
                uint64_t deadline_ns, ServerAddress* out, LookupError* error) {
  const int fd = ConnectTcpBy(rpcbind_addr, deadline_ns);
  if (fd < 0) {
    error->stat = errno == ETIMEDOUT ? RPC_TIMEDOUT : RPC_RPCBFAILURE;
    error->cause.re_status = RPC_CANTSEND;
    error->cause.re_errno = errno;
    error->detail = "cannot reach rpcbind: ";
    error->detail.append(std::strerror(errno));
    return false;
  }
  sockaddr_in target = rpcbind_addr;
  netbuf nb{};
  nb.buf = &target;
  nb.len = nb.maxlen = sizeof target;
  ClientPtr rpcb(clnt_vc_create(fd, &nb, RPCBPROG, RPCBVERS, 0, 0));
  if (!rpcb) {
    close(fd);
    error->stat = RPC_RPCBFAILURE;
    error->cause = rpc_createerr.cf_error;
    error->detail = "cannot talk to rpcbind: ";
    error->detail.append(clnt_sperrno(rpc_createerr.cf_stat));
    return false;
  }
  CLNT_CONTROL(rpcb.get(), CLSET_FD_CLOSE, nullptr);
  char netid[] = "tcp";
  char empty[] = "";
  RPCB args{};
  args.r_prog = prog;
  args.r_vers = vers;
  args.r_netid = netid;
  args.r_addr = empty;
  args.r_owner = empty;
  char* uaddr = nullptr;
  const enum clnt_stat st =
      CLNT_CALL(rpcb.get(), RPCBPROC_GETADDR, reinterpret_cast<xdrproc_t>(xdr_rpcb),
                reinterpret_cast<char*>(&args), reinterpret_cast<xdrproc_t>(xdr_wrapstring),
                reinterpret_cast<char*>(&uaddr), Remaining(deadline_ns));
  if (st != RPC_SUCCESS) {
    error->stat = RPC_RPCBFAILURE;
    CLNT_GETERR(rpcb.get(), &error->cause);
    error->detail = "rpcbind: ";
    error->detail.append(clnt_sperrno(st));
    return false;
  }
  const bool registered = uaddr != nullptr && uaddr[0] != '\0';
  netbuf* taddr = registered ? uaddr2taddr(tcp, uaddr) : nullptr;
  xdr_free(reinterpret_cast<xdrproc_t>(xdr_wrapstring), reinterpret_cast<char*>(&uaddr));
  if (!registered) {
    error->stat = RPC_PROGNOTREGISTERED;
    error->detail = "rpcbind knows no tcp address for this program and version";
    return false;
  }
  if (!taddr || taddr->len > sizeof out->addr || taddr->len < sizeof(sockaddr_in)) {
    if (taddr) {
      free(taddr->buf);
      free(taddr);
    }
    error->stat = RPC_N2AXLATEFAILURE;
    error->detail = "rpcbind returned an address that is not IPv4";
    return false;
  }
  std::memcpy(&out->addr, taddr->buf, taddr->len);
  out->len = taddr->len;
  free(taddr->buf);
  free(taddr);
  if (IsWildcard(out->addr)) {
    // A server bound to every address: it is reachable where its rpcbind was.
    reinterpret_cast<sockaddr_in*>(&out->addr)->sin_addr = rpcbind_addr.sin_addr;
  }
  return true;
}

}  // namespace

bool LookUpTcpAddress(const char* host, rpcprog_t prog, rpcvers_t vers, uint64_t deadline_ns,
                      ServerAddress* out, LookupError* error) {
  NetconfigPtr tcp(getnetconfigent("tcp"));
  if (!tcp) {
    error->stat = RPC_UNKNOWNPROTO;
    error->detail = "/etc/netconfig has no tcp entry";
    return false;
  }
  addrinfo hints{};
  hints.ai_family = AF_INET;  // as libtirpc's "tcp" nettype: IPv4
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  const int gai = getaddrinfo(host, nullptr, &hints, &found);
  if (gai != 0 || !found) {
    error->stat = RPC_UNKNOWNHOST;
    error->detail = "unknown host: ";
    error->detail.append(gai_strerror(gai));
    return false;
  }
  bool ok = false;
  for (addrinfo* a = found; a && !ok && NowNs() < deadline_ns; a = a->ai_next) {
    sockaddr_in rpcbind_addr{};
    std::memcpy(&rpcbind_addr, a->ai_addr, sizeof rpcbind_addr);
    rpcbind_addr.sin_port = htons(kRpcbindPort);
    ok = AskRpcbind(rpcbind_addr, tcp.get(), prog, vers, deadline_ns, out, error);
  }
  freeaddrinfo(found);
  if (!ok && error->stat == RPC_SUCCESS) {
    error->stat = RPC_TIMEDOUT;
    error->detail = "no time left to ask rpcbind";
  }
  return ok;
}

}  // namespace san::rpcvia
