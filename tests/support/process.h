// Test support: the one implementation of waiting for, decoding and killing a child process, and
// of "is this program installed". The tests' process harnesses are built on it: support/child.h
// (a forked function) and support/program.h (an exec'd program).
//
// Every wait has a deadline unless the caller asks for none (a negative timeout); a child the
// caller stops waiting for stays running, so the caller decides whether it is killed.
// Test-only. Thread-safety: no state of its own; one thread waits for a given child.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>

namespace san::testing_support {

// What WaitBounded returns when there is no wait status.
inline constexpr int kStillRunning = -1;  // the deadline passed first
inline constexpr int kNotAChild = -2;     // waitpid failed (not ours, or reaped elsewhere)

// A wait status as one number: the exit code, or 128 + the signal that killed it. A negative
// value (no status: kStillRunning, kNotAChild) is returned as it is.
int ExitCode(int wait_status);

// The exit code of a process that exited by itself; -1 if a signal ended it or there is no
// status. (For callers to whom a death by SIGINT must not read as "exit 130".)
int ExitedCode(int wait_status);

// Waits up to timeout_ms (negative: without limit) for child `pid` to end and reaps it: its wait
// status, or kStillRunning / kNotAChild. `usage`, if given, gets its resource use once it ended.
int WaitBounded(pid_t pid, int timeout_ms, rusage* usage = nullptr);

// WaitBounded, but a child that outlives timeout_ms is killed (KillAndReap) and kStillRunning
// returned: nothing is left running.
int WaitOrKill(pid_t pid, int timeout_ms, bool group);

// SIGKILL to `pid` (and first to its process group, when `group`: the harness made it a group
// leader), then reaps it: its wait status.
int KillAndReap(pid_t pid, bool group);

// The path of `program` as execvp would find it (a name with a '/' is taken as it is), "" if it is
// not there or not executable.
std::string FindProgram(const std::string& program);
inline bool Installed(const std::string& program) { return !FindProgram(program).empty(); }

}  // namespace san::testing_support
