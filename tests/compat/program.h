// Test support for the transparency suite: real programs (nobody here wrote them) started under
// `sanrun` or plain, each with its output in a log file, always stopped and reaped; free ports,
// listening checks through /proc/net/tcp (no probe connection), and the SAN_REPORT lines the
// library writes at exit. Test-only.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/inet.h"

namespace san::testing_support {

// Whether a tool is installed (on PATH).
inline bool Installed(const std::string& tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

class Program {
 public:
  // Runs argv (under sanrun if `sanrun` is non-empty), with `env` added, output to `log`.
  Program(const std::vector<std::string>& argv, const std::string& sanrun,
          const std::map<std::string, std::string>& env, const std::string& log)
      : log_(log) {
    std::vector<std::string> full;
    if (!sanrun.empty()) {
      full = {sanrun, "--"};
    }
    full.insert(full.end(), argv.begin(), argv.end());
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);  // our own group: stopping us stops what we started
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      FILE* out = fopen(log.c_str(), "w");
      if (out) {
        dup2(fileno(out), STDOUT_FILENO);
        dup2(fileno(out), STDERR_FILENO);
      }
      std::vector<char*> args;
      for (std::string& s : full) args.push_back(s.data());
      args.push_back(nullptr);
      execvp(args[0], args.data());
      _exit(127);
    }
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() {
    if (pid_ > 0) {
      kill(-pid_, SIGKILL);
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Exit code (or 128 + signal); -1 if it did not end within timeout_ms (then it is killed).
  int Wait(int timeout_ms) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (pid_ > 0) {
      int st = 0;
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (std::chrono::steady_clock::now() >= end) {
        kill(-pid_, SIGKILL);
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  // Asks it to stop with `sig`, then waits (killing it after timeout_ms).
  int Stop(int sig, int timeout_ms) {
    if (pid_ > 0) kill(pid_, sig);
    return Wait(timeout_ms);
  }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

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
