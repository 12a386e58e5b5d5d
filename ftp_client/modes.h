// ftp_client's two ways of running: batch (one URL, one action, an exit code for scripts) and
// interactive (netkit-ftp commands, libedit line editing on a terminal, commands from stdin
// otherwise). Thread-safety: single-threaded programs.
#pragma once

#include <string>

#include "ftp_client/client.h"

namespace san::ftp {

// Exit codes of batch mode (also documented in --help and docs/ftp.md).
enum ExitCode {
  kExitOk = 0,
  kExitUsage = 1,
  kExitConnect = 2,  // cannot connect, or the server refused the session
  kExitLogin = 3,
  kExitRemote = 4,    // the server refused the file operation (4xx/5xx)
  kExitTransfer = 5,  // the transfer broke off
  kExitLocal = 6,     // a local file could not be opened or written
  // Ctrl-C (SIGINT): a running transfer was aborted (ABOR), or the run was stopped before one.
  // 128 + SIGINT, what a shell reports for a program that SIGINT ended.
  kExitInterrupted = 130,
};

struct BatchRequest {
  std::string url;
  std::string output;   // -o: local file for a download ("-" = stdout)
  std::string put;      // --put: local file to upload
  bool list = false;    // --list: LIST to stdout
  bool resume = false;  // --resume: REST from the local (get) or remote (put) size
  bool ascii = false;   // --ascii: TYPE A (CRLF on the wire, LF in the local file)
};

int RunBatch(const BatchRequest& req, const ClientOptions& options);
// host may be "" (no connection yet). Reads commands until bye/EOF.
int RunInteractive(const std::string& host, uint16_t port, const ClientOptions& options);

}  // namespace san::ftp
