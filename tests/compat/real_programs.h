// Test support for the suites that run real programs (nobody here wrote them) under `sanrun` or
// plain: how such a program is started (support/program.h runs it: its output in a log file,
// always stopped and reaped), free ports, listening checks through /proc/net/tcp (no probe
// connection), and the SAN_REPORT lines the library writes at exit. Test-only.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/inet.h"
#include "support/process.h"
#include "support/program.h"

namespace san::testing_support {

// A real program in its own process group (stopping it stops what it started), under `sanrun`
// when that is set, with `env` added, its stdout and stderr in `log` (Program::Output).
inline ProgramSpec RealProgram(const std::vector<std::string>& argv, const std::string& sanrun,
                               const std::map<std::string, std::string>& env,
                               const std::string& log) {
  ProgramSpec spec;
  spec.argv = argv;
  spec.sanrun = sanrun;
  for (const auto& [k, v] : env) spec.env.push_back(k + "=" + v);
  spec.own_group = true;
  spec.stdout_path = spec.stderr_path = log;
  return spec;
}

// A port nobody listens on now (the kernel's choice for a bound socket, released).
inline uint16_t FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = Loopback(0);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  const uint16_t port = PortOf(fd);
  close(fd);
  return port;
}

// True once something listens on TCP `port` (read from /proc/net/tcp and tcp6).
inline bool WaitListening(uint16_t port, int timeout_ms) {
  char want[8];
  snprintf(want, sizeof want, ":%04X", port);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
      std::ifstream in(table);
      std::string line;
      while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string slot, local, remote, state;
        fields >> slot >> local >> remote >> state;
        if (state == "0A" && local.size() > 5 && local.substr(local.size() - 5) == want)
          return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// One process's SAN_REPORT line (socket/runtime.h: Usage).
struct Usage {
  std::string prog;
  uint64_t shm_connections = 0, tcp_connections = 0, shm_bytes_sent = 0, shm_bytes_received = 0;
  uint64_t lines = 0;  // how many processes' lines were summed
};

// Every line of a SAN_REPORT file whose program name starts with `prog`, summed.
inline Usage UsageOf(const std::string& report_file, const std::string& prog) {
  Usage total;
  total.prog = prog;
  std::ifstream in(report_file);
  std::string line;
  while (std::getline(in, line)) {
    std::map<std::string, std::string> kv;
    std::istringstream words(line);
    std::string word;
    while (words >> word) {
      const size_t eq = word.find('=');
      if (eq != std::string::npos) kv[word.substr(0, eq)] = word.substr(eq + 1);
    }
    if (kv["prog"].rfind(prog, 0) != 0) continue;
    ++total.lines;
    total.shm_connections += std::stoull(kv["shm_connections"]);
    total.tcp_connections += std::stoull(kv["tcp_connections"]);
    total.shm_bytes_sent += std::stoull(kv["shm_bytes_sent"]);
    total.shm_bytes_received += std::stoull(kv["shm_bytes_received"]);
  }
  return total;
}

}  // namespace san::testing_support
