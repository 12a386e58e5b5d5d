// Test support for drpc: run a program to completion with its output captured, and run drpcd
// for the length of a test (bound to a port the kernel chose, found through --port-file).
// Everything is bounded: a program that outlives its time limit is killed and the test fails.
// Test-only. Thread-safety: none needed (one test thread).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace san::drpc::testing {

struct RunResult {
  int exit_code = -1;   // -1 if killed by a signal (see signal)
  int signal = 0;
  bool timed_out = false;
  double seconds = 0;
  double cpu_seconds = 0;  // user + system time of the program (not of its children)
  std::string out, err;
};

// argv[0] is a path. env entries ("K=V") are added to this process's environment.
RunResult RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
              double timeout_s = 30);

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& data, int mode = 0644);
std::string ReadFile(const std::string& path);  // "" if missing
bool Exists(const std::string& path);

// A drpcd process. Start() waits (bounded) for its port; the destructor stops it (SIGTERM, then
// SIGKILL after 10 s) if the test did not.
class Daemon {
 public:
  Daemon() = default;
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Extra drpcd arguments after --listen/--port-file; env added to the daemon's environment.
  bool Start(const std::string& dir, const std::string& listen_host,
             const std::vector<std::string>& args, const std::vector<std::string>& env = {});
  int Stop();   // SIGTERM and wait; the exit status (or 128+signal)
  void Kill();  // SIGKILL and reap
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const { return ReadFile(log_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_;
};

// Built programs (compile definitions from tests/drpc/CMakeLists.txt).
std::string DrpcPath();
std::string DrpcdPath();

}  // namespace san::drpc::testing
