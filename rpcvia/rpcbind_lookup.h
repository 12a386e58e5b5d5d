// Where does (program, version) listen over TCP at a host? Asks the host's rpcbind
// (RPCBPROC_GETADDR, protocol version 3, over TCP: rpcbind answers for the netid the
// question arrives on) within the caller's time, as libtirpc's
// clnt_create does for "tcp", so a via client finds any server rpcbind knows: ours (whose via
// listener is registered as the program's tcp address) or anybody else's.
// Thread-safety: reentrant (libtirpc's clients and netconfig calls are).
#pragma once

#include <rpc/rpc.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace san::rpcvia {

struct ServerAddress {
  sockaddr_storage addr{};
  socklen_t len = 0;
};

struct LookupError {
  enum clnt_stat stat = RPC_SUCCESS;  // for rpc_createerr.cf_stat
  struct rpc_err cause {};            // rpc_createerr.cf_error (the rpcbind call's own failure)
  std::string detail;                 // one line for rpcvia_create_detail()
};

// Fills `out` and returns true, or returns false with `error` set: RPC_UNKNOWNHOST,
// RPC_RPCBFAILURE (rpcbind unreachable or failing; the cause in error.cause),
// RPC_PROGNOTREGISTERED (rpcbind has no tcp address for this program and version).
bool LookUpTcpAddress(const char* host, rpcprog_t prog, rpcvers_t vers, uint64_t deadline_ns,
                      ServerAddress* out, LookupError* error);

}  // namespace san::rpcvia
