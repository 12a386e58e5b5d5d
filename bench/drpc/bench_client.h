// The client half of drpc-bench: a process of its own per transport, driven over a pipe.
//
// Why a process per transport: gRPC puts every socket of a process into one epoll set, and the
// compat layer serves an epoll set holding a SAN socket itself (spin, then sleep on the
// doorbell); a kernel-TCP channel in the same process would pay for that too, and the baseline
// would be slower than plain gRPC. So the TCP client runs with SAN_PROVIDER=off against a drpcd
// with SAN_PROVIDER=off: no SAN socket on either end, kernel TCP and kernel epoll throughout.
// The SAN client and its drpcd are the same programs with SAN on.
//
// Protocol (one line each way, the child answers every command in order):
//   child, once connected:  "ready <mode>"            | "error <message>" (then it exits)
//   "ping <size> <n> <record>" -> "ok[ <us>...]"       (record 0: no samples back) | "error <m>"
//   "push <local> <remote> <timeout_s>" -> "ok <bytes> <seconds>" | "error <m>"
//   "pull <remote> <local> <timeout_s>" -> "ok <bytes> <seconds>" | "error <m>"
//   end of input: the child exits 0.
// Thread-safety: BenchClient is used from one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace san::drpc::bench {

// Child side: connects to target (a drpc target spec) and serves the protocol on stdin/stdout.
// Returns the process exit status.
int RunClientProcess(const std::string& target, const std::string& token);

// Parent side: one client process.
class BenchClient {
 public:
  BenchClient() = default;
  ~BenchClient();
  BenchClient(const BenchClient&) = delete;
  BenchClient& operator=(const BenchClient&) = delete;

  // Spawns `self --client target --token T` with extra environment entries; waits for "ready".
  bool Start(const std::string& self, const std::string& target, const std::string& token,
             const std::vector<std::string>& env, std::string* error);
  const std::string& mode() const { return mode_; }
  pid_t pid() const { return pid_; }

  bool Ping(int size, int n, std::vector<double>* us, std::string* error);
  // data: the bytes on a data connection (client/data_transfer.h), else in the call's messages.
  bool Push(const std::string& local, const std::string& remote, uint32_t timeout_s, bool data,
            uint64_t* bytes, double* seconds, std::string* error);
  bool Pull(const std::string& remote, const std::string& local, uint32_t timeout_s, bool data,
            uint64_t* bytes, double* seconds, std::string* error);

 private:
  bool Transfer(const std::string& command, uint64_t* bytes, double* seconds, std::string* error);
  bool Ask(const std::string& command, std::string* answer, std::string* error);

  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::string mode_;
};

}  // namespace san::drpc::bench
