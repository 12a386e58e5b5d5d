// Test support for drpc: run a program to completion with its output captured, and run drpcd
// for the length of a test (bound to a port the kernel chose, found through --port-file), both
// with support/program.h. Everything is bounded: a program that outlives its time limit is
// killed and the test fails.
// Test-only. Thread-safety: none needed (one test thread).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "support/program.h"

namespace san::drpc::testing {

// Programs run to completion, output captured (support/program.h).
using testing_support::RunProgram;
using testing_support::RunResult;

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
  // Extra drpcd arguments after --listen/--port-file; env added to the daemon's environment.
  bool Start(const std::string& dir, const std::string& listen_host,
             const std::vector<std::string>& args, const std::vector<std::string>& env = {});
  int Stop();   // SIGTERM and wait; the exit status (or 128+signal), 999 if it had to be killed
  void Kill() { program_.Kill(); }  // SIGKILL and reap
  int port() const { return port_; }
  pid_t pid() const { return program_.pid(); }
  std::string log() const { return ReadFile(log_); }

 private:
  testing_support::Program program_;
  int port_ = 0;
  std::string log_;
};

// Built programs (compile definitions from tests/drpc/CMakeLists.txt).
std::string DrpcPath();
std::string DrpcdPath();

}  // namespace san::drpc::testing
