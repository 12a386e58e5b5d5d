#include "rpcvia/tirpc_calls.h"

#include <dlfcn.h>

namespace san::rpcvia::tirpc {
namespace {

constexpr const char* kTirpcVersion = "TIRPC_0.3.0";  // libtirpc's version node for these calls

// The loaded libtirpc, found from a function librpcvia does not define (its address is
// libtirpc's), so the lookup works whatever the order of the libraries in the process.
void* Tirpc() {
  static void* const handle = [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&clnt_tp_create_timed), &info) == 0 ||
        info.dli_fname == nullptr) {
      return static_cast<void*>(nullptr);
    }
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }();
  return handle;
}

template <typename Fn>
Fn Find(const char* name) {
  void* const lib = Tirpc();
  if (lib == nullptr) return nullptr;
  void* fn = dlvsym(lib, name, kTirpcVersion);
  if (fn == nullptr) fn = dlsym(lib, name);
  return reinterpret_cast<Fn>(fn);
}

CLIENT* NoTransport() {
  rpc_createerr.cf_stat = RPC_UNKNOWNPROTO;
  return nullptr;
}

}  // namespace

CLIENT* ClntCreate(const char* host, rpcprog_t prog, rpcvers_t vers, const char* nettype) {
  using Fn = CLIENT* (*)(const char*, rpcprog_t, rpcvers_t, const char*);
  static const Fn real = Find<Fn>("clnt_create");
  return real ? real(host, prog, vers, nettype) : NoTransport();
}

CLIENT* ClntCreateTimed(const char* host, rpcprog_t prog, rpcvers_t vers, const char* nettype,
                        const timeval* timeout) {
  using Fn = CLIENT* (*)(const char*, rpcprog_t, rpcvers_t, const char*, const timeval*);
  static const Fn real = Find<Fn>("clnt_create_timed");
  return real ? real(host, prog, vers, nettype, timeout) : NoTransport();
}

int SvcCreate(void (*dispatch)(svc_req*, SVCXPRT*), rpcprog_t prog, rpcvers_t vers,
              const char* nettype) {
  using Fn = int (*)(void (*)(svc_req*, SVCXPRT*), rpcprog_t, rpcvers_t, const char*);
  static const Fn real = Find<Fn>("svc_create");
  return real ? real(dispatch, prog, vers, nettype) : 0;
}

}  // namespace san::rpcvia::tirpc
