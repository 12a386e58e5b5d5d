// RunCommand: runs one command for Exec or a queued task, without a shell, and passes its output
// on as it comes.
//
// The command is started with posix_spawnp (vfork-like: no fork of a process full of gRPC and
// sanlib threads and shared mappings) in its own process group, stdin from /dev/null, stdout and
// stderr on two pipes, every other fd closed, default signal dispositions and mask. Output goes to
// the sink in pieces of up to 64 KiB; a sink that returns false (the client went away) or a cancel
// check that returns true kills the group. At the timeout the whole group gets SIGKILL. Once the
// command exited, output still buffered is drained for up to 200 ms, then what is left of the
// group (background children holding the pipes) is killed too: a call never outlives its command
// by more than that.
// Thread-safety: each call is independent; the sink and cancel check run on the calling thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sanlib/common/status.h"

namespace san::drpc {

struct ExecSpec {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // added to (or replacing) the daemon's environment
  std::string cwd;                         // "" = the daemon's working directory
  uint32_t timeout_ms = 0;                 // 0 = none (callers always set one)
};

struct ExecOutcome {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  bool cancelled = false;  // the sink or the cancel check stopped it
  uint64_t duration_us = 0;
  uint64_t output_bytes = 0;
};

enum class OutputStream { kStdout, kStderr };
using OutputSink = std::function<bool(OutputStream, const char* data, size_t len)>;
using CancelCheck = std::function<bool()>;

// Errors are the spawn's (ENOENT: no such command, EACCES, ENOTDIR for the cwd, ...); once the
// command started, the outcome says how it ended.
Result<ExecOutcome> RunCommand(const ExecSpec& spec, const OutputSink& sink,
                               const CancelCheck& cancelled);

}  // namespace san::drpc
