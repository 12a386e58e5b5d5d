// The C entry points of librpcvia (rpcvia/rpcvia.h): nettype dispatch between our transport and
// libtirpc, the create-error reporting, the fallback policy and the service loop.
#define RPCVIA_NO_MAPPING  // this file hands other nettypes to libtirpc (tirpc_calls.h)
#include "rpcvia/rpcvia.h"

#include <netinet/in.h>
#include <san/san.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rpcvia/deadline_connect.h"
#include "rpcvia/rpcbind_lookup.h"
#include "rpcvia/tirpc_calls.h"
#include "rpcvia/via_client.h"
#include "rpcvia/via_xprt.h"

namespace san::rpcvia {
namespace {

constexpr timeval kDefaultCreateTimeout = {25, 0};  // libtirpc's rpcbind total timeout

thread_local std::string create_detail;
std::atomic<int> fallback_override{-1};  // -1: RPCVIA_FALLBACK decides

bool IsVia(const char* nettype) { return nettype != nullptr && std::strcmp(nettype, "via") == 0; }

bool FallbackAllowed() {
  const int set = fallback_override.load(std::memory_order_relaxed);
  if (set >= 0) return set == RPCVIA_FALLBACK_TCP;
  const char* env = std::getenv("RPCVIA_FALLBACK");
  return env == nullptr || std::strcmp(env, "fail") != 0;
}

CLIENT* CreateFailed(enum clnt_stat stat, int err, std::string detail) {
  rpc_createerr.cf_stat = stat;
  rpc_createerr.cf_error = rpc_err{};
  rpc_createerr.cf_error.re_errno = err;
  create_detail = std::move(detail);
  return nullptr;
}

CLIENT* CreateViaClientTimed(const char* host, rpcprog_t prog, rpcvers_t vers, const timeval& tv) {
  create_detail.clear();
  if (host == nullptr) return CreateFailed(RPC_UNKNOWNHOST, 0, "no host given");
  const uint64_t deadline = DeadlineAfter(tv);
  ServerAddress server;
  LookupError lookup;
  if (!LookUpTcpAddress(host, prog, vers, deadline, &server, &lookup)) {
    rpc_createerr.cf_stat = lookup.stat;
    rpc_createerr.cf_error = lookup.cause;
    create_detail = std::move(lookup.detail);
    return nullptr;
  }
  const int fd = san_socket(AF_INET, SOCK_SAN | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return CreateFailed(RPC_SYSTEMERROR, errno, "san_socket failed");
  if (const int err =
          ConnectBy(fd, reinterpret_cast<const sockaddr*>(&server.addr), server.len, deadline);
      err != 0) {
    san_close(fd);
    return err == ETIMEDOUT ? CreateFailed(RPC_TIMEDOUT, err, "connect timed out")
                            : CreateFailed(RPC_SYSTEMERROR, err, "connect failed");
  }
  san_info info{};
  san_getinfo(fd, &info);
  if (info.mode != SAN_MODE_SHM && info.mode != SAN_MODE_VERBS) {
    std::string why = "TCP fallback: ";
    why.append(info.fallback[0] != '\0' ? info.fallback : "the server is not SAN-capable");
    if (!FallbackAllowed()) {
      san_close(fd);
      return CreateFailed(RPC_SYSTEMERROR, EPROTONOSUPPORT, std::move(why));
    }
    create_detail = std::move(why);
  }
  CLIENT* client = CreateViaClient(fd, prog, vers, server);
  if (client == nullptr) {
    san_close(fd);
    return CreateFailed(RPC_SYSTEMERROR, ENOMEM, "out of memory");
  }
  return client;
}

// ---- service side ------------------------------------------------------------------------------

// The process's via listener (one, shared by every program and version served over via, as
// libtirpc shares one transport per netconfig) and which (program, version)s it was registered for.
struct ViaService {
  std::mutex lock;
  SVCXPRT* rendezvous = nullptr;
  std::set<std::pair<rpcprog_t, rpcvers_t>> registered;
};

ViaService& Service() {
  static ViaService* service = new ViaService;  // never destroyed: svc_run may run until exit
  return *service;
}

int CreateViaService(void (*dispatch)(svc_req*, SVCXPRT*), rpcprog_t prog, rpcvers_t vers) {
  ViaService& s = Service();
  std::lock_guard<std::mutex> hold(s.lock);
  if (s.registered.count({prog, vers}) != 0) return 1;  // asked twice (e.g. "-s via -s via")
  if (s.rendezvous == nullptr) {
    s.rendezvous = CreateViaRendezvous();
    if (s.rendezvous == nullptr) {
      std::fprintf(stderr, "rpcvia: cannot create the via listener: %s\n", std::strerror(errno));
      return 0;
    }
  }
  netconfig* tcp = getnetconfigent("tcp");
  if (tcp == nullptr) {
    std::fprintf(stderr, "rpcvia: /etc/netconfig has no tcp entry\n");
    return 0;
  }
  const bool ok = svc_reg(s.rendezvous, prog, vers, dispatch, tcp);
  freenetconfigent(tcp);
  if (!ok) {
    std::fprintf(stderr,
                 "rpcvia: cannot register program %lu version %lu on tcp with rpcbind "
                 "(is it running? is a tcp transport of this program registered already? "
                 "create \"via\" before \"tcp\")\n",
                 static_cast<unsigned long>(prog), static_cast<unsigned long>(vers));
    return 0;
  }
  s.registered.emplace(prog, vers);
  return 1;
}

bool ServedByVia(rpcprog_t prog, rpcvers_t vers) {
  ViaService& s = Service();
  std::lock_guard<std::mutex> hold(s.lock);
  return s.registered.count({prog, vers}) != 0;
}

}  // namespace
}  // namespace san::rpcvia

using namespace san::rpcvia;

extern "C" {

CLIENT* rpcvia_clnt_create_timed(const char* host, rpcprog_t prog, rpcvers_t vers,
                                 const char* nettype, const struct timeval* timeout) {
  if (!IsVia(nettype)) return tirpc::ClntCreateTimed(host, prog, vers, nettype, timeout);
  return CreateViaClientTimed(host, prog, vers, timeout ? *timeout : kDefaultCreateTimeout);
}

CLIENT* rpcvia_clnt_create(const char* host, rpcprog_t prog, rpcvers_t vers, const char* nettype) {
  if (!IsVia(nettype)) return tirpc::ClntCreate(host, prog, vers, nettype);
  return CreateViaClientTimed(host, prog, vers, kDefaultCreateTimeout);
}

int rpcvia_svc_create(void (*dispatch)(struct svc_req*, SVCXPRT*), rpcprog_t prog, rpcvers_t vers,
                      const char* nettype) {
  if (IsVia(nettype)) return CreateViaService(dispatch, prog, vers);
  // The via listener is this program's tcp address too (it serves plain TCP clients): a second
  // tcp listener could not register with rpcbind.
  if (nettype != nullptr && std::strcmp(nettype, "tcp") == 0 && ServedByVia(prog, vers)) return 1;
  return tirpc::SvcCreate(dispatch, prog, vers, nettype);
}

void rpcvia_svc_run(void) {
  std::vector<pollfd> fds;
  for (;;) {
    if (svc_max_pollfd == 0 && svc_pollfd == nullptr) return;  // svc_exit()
    // A copy: dispatching may register or drop transports (svc_pollfd is reallocated).
    fds.assign(svc_pollfd, svc_pollfd + svc_max_pollfd);
    const int ready = san_poll(fds.data(), fds.size(), -1);
    if (ready > 0) {
      svc_getreq_poll(fds.data(), ready);
    } else if (ready < 0 && errno != EINTR) {
      std::fprintf(stderr, "rpcvia_svc_run: poll: %s\n", std::strerror(errno));
      return;
    }
  }
}

void rpcvia_set_fallback(enum rpcvia_fallback policy) {
  fallback_override.store(policy, std::memory_order_relaxed);
}

const char* rpcvia_create_detail(void) { return create_detail.c_str(); }

}  // extern "C"
