// The drpc command line: global options, then one command and its own options.
//
//   drpc (--hosts N1,N2,.. | --hostfile F) [--token-file F] [--json] [--timeout S]
//        [--connect-timeout S] [--parallel N] COMMAND [command options] [--] [args]
//
//   ping   [--size BYTES] [--count N]
//   exec   [--env K=V].. [--cwd DIR] [--cmd-timeout S] [--] ARGV..
//   status
//   push   [--mode OCTAL] [--overwrite] [--in-call] LOCAL REMOTE
//   pull   [--in-call] REMOTE LOCAL        (several hosts: LOCAL.<host> per host)
//   submit [--env K=V].. [--cwd DIR] [--cmd-timeout S] [--] ARGV..
//   wait   [--wait S] TASK_ID
//   cancel TASK_ID
//
// Parsing is pure (no files read, no sockets): the host file is named here and read by the caller.
// Thread-safety: stateless; CliOptions is a plain value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sanlib/common/status.h"

namespace san::drpc {

enum class Command { kPing, kExec, kStatus, kPush, kPull, kSubmit, kWait, kCancel };

struct CliOptions {
  std::string hosts;       // --hosts, as given
  std::string hostfile;    // --hostfile
  std::string token_file;  // --token-file (default: $DRPC_TOKEN_FILE)
  bool json = false;
  uint32_t timeout_ms = 30000;         // per-call deadline
  uint32_t connect_timeout_ms = 3000;  // per-node connection set-up
  uint32_t parallel = 64;              // nodes called at once
  Command command = Command::kPing;

  // ping
  uint32_t size = 0;
  uint32_t count = 1;
  // exec, submit
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;
  std::string cwd;
  uint32_t cmd_timeout_ms = 0;
  // push, pull
  std::string local;
  std::string remote;
  uint32_t mode = 0644;
  bool overwrite = false;
  bool in_call = false;  // the bytes in the call's messages instead of a data connection
  // wait, cancel
  uint64_t task_id = 0;
  uint32_t wait_ms = 30000;
};

struct CliParse {
  bool help = false;  // --help: print Usage() and exit 0
  std::string error;  // non-empty: print it (and the usage hint), exit 2
  CliOptions options;
};

CliParse ParseCli(const std::vector<std::string>& args);  // args without argv[0]
const char* CliUsage();
const char* CommandName(Command c);

}  // namespace san::drpc
