// Test support: programs the tests run (exec'd, never a function of the test: see
// support/child.h for that). Program runs one in the background, RunProgram runs one to
// completion with its output captured, Interactive runs one whose stdin the test types into.
//
// Programs are started with posix_spawn, which is safe in a multithreaded test process (no fork
// of this process: see .ci/run on ASan and fork). argv[0] is looked up in PATH when it has no '/'.
// SIGINT is at its default in the program even if the test ignores it (Ctrl-C must reach it as
// from a terminal); other signal dispositions and the signal mask are inherited.
//
// Every process started here is stopped and reaped by its object. Test-only. Thread-safety: an
// object is used by one thread.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "support/process.h"  // kStillRunning, kNotAChild

namespace san::testing_support {

// How to start a program, and how its object ends it.
struct ProgramSpec {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value", replacing (or added to) this process's environment
  std::string sanrun;            // when set: run as `sanrun -- argv...`
  bool own_group = false;        // a process group of its own, killed with it
  // Standard streams: inherited unless a file (opened for reading; output files created, and
  // truncated unless `append`; stderr naming stdout's file shares it) or a descriptor is given.
  std::string stdin_path;
  int stdin_fd = -1;
  std::string stdout_path;
  int stdout_fd = -1;
  std::string stderr_path;
  bool append = false;
  // How the destructor (and Shutdown) end it while it runs (not yet reaped): `stop_signal`, then
  // SIGKILL once it outlived stop_timeout_ms (negative: wait without limit); then, with its own
  // group, SIGKILL to what is left in the group. One reaped by a Wait is left alone, and so is
  // what it left behind.
  int stop_signal = SIGKILL;
  int stop_timeout_ms = 0;
};

class Program {
 public:
  Program() = default;
  explicit Program(const ProgramSpec& spec) { Start(spec); }
  ~Program() { Shutdown(); }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // False (error() says why) if it could not be started.
  bool Start(const ProgramSpec& spec);
  bool running() const { return pid_ > 0; }  // started and not reaped yet
  pid_t pid() const { return pid_; }
  const std::string& error() const { return error_; }
  std::string Output() const;  // what is in its stdout file so far

  // Its wait status once it ended within timeout_ms (negative: no limit), kStillRunning if it
  // did not (it is left running), kNotAChild.
  int WaitStatus(int timeout_ms, rusage* usage = nullptr);
  // Its exit code (or 128 + signal) once it ended within timeout_ms; -1 if it did not (it is
  // then killed, with its group).
  int Wait(int timeout_ms);
  // true once it ended (reaped here); never waits.
  bool Exited() { return pid_ <= 0 || WaitStatus(0) >= 0; }
  bool Signal(int sig) const;
  // Signals it, then Wait(timeout_ms). Leaves the rest of its group alone.
  int Stop(int sig, int timeout_ms);
  // SIGKILL (to its group too) and reap: its wait status (kNotAChild if it was not running).
  int Kill();
  // SIGKILL to whatever is left in its process group, after it ended too (a no-op without one).
  void KillGroup() const;
  // Ends it as the spec says (what the destructor does).
  void Shutdown();

 private:
  pid_t pid_ = -1;
  pid_t group_ = -1;
  int stop_signal_ = SIGKILL;
  int stop_timeout_ms_ = 0;
  std::string stdout_path_;
  std::string error_;
};

// A program run to completion.
struct RunResult {
  int exit_code = -1;      // -1 if it did not exit by itself (signal, timeout, not started)
  int signal = 0;          // the signal that ended it
  bool timed_out = false;  // killed at the deadline
  double seconds = 0;
  double cpu_seconds = 0;  // user + system time of the program (not of its children)
  std::string out, err;
};
// Runs argv in a process group of its own with `input` on stdin and `env` added, killing it after
// timeout_s, and kills whatever it left in its group.
RunResult RunProgram(const std::vector<std::string>& argv, double timeout_s = 30,
                     const std::string& input = "", const std::vector<std::string>& env = {});

// A program whose stdin is a pipe the test writes to (interactive programs) and whose
// stdout/stderr go to files, in a process group of its own, which can be signalled mid-run
// (SIGINT as Ctrl-C would send it). The destructor kills it and its group if it still runs.
class Interactive {
 public:
  Interactive() = default;
  ~Interactive();
  Interactive(const Interactive&) = delete;
  Interactive& operator=(const Interactive&) = delete;

  bool Start(const std::vector<std::string>& argv);
  bool Write(const std::string& text);  // to its stdin
  void CloseInput();
  bool Signal(int sig) const { return program_.Signal(sig); }
  // Its exit code once it ended within timeout_ms; -1 if it did not (then it is killed) or died
  // by a signal. Whatever is left in its group is killed.
  int Wait(int timeout_ms);
  std::string out() const { return program_.Output(); }
  std::string err() const;
  // Waits up to timeout_ms until its stdout contains `text`.
  bool WaitForOutput(const std::string& text, int timeout_ms) const;

 private:
  Program program_;
  std::string out_path_, err_path_;
  int input_ = -1;
};

}  // namespace san::testing_support
