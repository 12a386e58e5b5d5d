// StatService: how `sanstat` sees this process's SAN sockets (like `ss` reading the kernel's).
//
// Every process that uses sanlib listens on the abstract Unix socket "\0sanlib/stat/<pid>" (so it
// is scoped to the network namespace, like the rendezvous, and vanishes with the process: nothing
// is left behind after SIGKILL). `sanstat` finds those names in /proc/net/unix, connects, and reads
// one report: a header line, then one line per socket (format below, fields tab-separated). Only a
// peer with our uid (or root) gets an answer.
//
//   #sanlib-stat 1 <pid> <comm>
//   fd  role  mode  local  peer  bytes_sent  bytes_received  credits  mtu  phase  fallback_reason
//   role: listen|conn   mode: shm|tcp|none   phase: proto::ClosePhaseName or "-"
//
// Thread-safety: Open/Close/Serve are called by the connection thread only (and the atfork hooks
// while no other thread runs). Ownership: owns its listening socket.
#pragma once

#include <string>

#include "common/status.h"
#include "common/unique_fd.h"
#include "socket/socket_table.h"

namespace san {

class StatService {
 public:
  static constexpr char kNamePrefix[] = "sanlib/stat/";

  // Binds "\0sanlib/stat/<getpid()>"; harmless if already open for this pid.
  Status Open();
  void Close() { listener_.reset(); }
  int fd() const { return listener_.get(); }
  // Answers every waiting request (nonblocking; each answer is one small write).
  void Serve(SocketTable& table);

  // The report text for `table` (exposed for tests).
  static std::string Report(SocketTable& table);

 private:
  UniqueFd listener_;
  int pid_ = 0;
};

}  // namespace san
