// Runtime: sanlib's process-wide state -- the configuration, the socket table, the provider, the
// connection and close threads -- created on first use and never destroyed (a preloaded library
// must not depend on static destruction order; the threads are stopped by the exit handler).
//
// Also installs the process hooks: pthread_atfork (the background threads do not survive fork;
// locks are not held across it) and atexit (open SAN sockets send FIN, closing ones get to post it).
// Thread-safety: Get() is thread-safe; members document their own.
#pragma once

#include <string>

#include "common/config.h"
#include "fabric/provider.h"
#include "proto/stream.h"
#include "socket/close_thread.h"
#include "socket/connection_thread.h"
#include "socket/socket_table.h"

namespace san {

class Runtime {
 public:
  static Runtime& Get();

  const Config& config() const { return config_; }
  SocketTable& table() { return table_; }
  ConnectionThread& connections() { return connections_; }
  CloseThread& closer() { return closer_; }

  // The provider that would carry a connection to `peer`, or nullptr with the reason why not.
  fabric::Provider* ProviderFor(const sockaddr* peer, socklen_t len, std::string* why_not);
  // The provider for a listener bound to `addr` (nullptr if SAN is off or none is available).
  fabric::Provider* ListenProvider(std::string* why_not);
  proto::StreamParams StreamParamsFor(const fabric::Provider& provider) const;

 private:
  Runtime();
  static void AtExit();

  const Config& config_;
  SocketTable table_;  // before connections_, which refers to it
  ConnectionThread connections_;
  CloseThread closer_;
  fabric::Provider* shm_ = nullptr;
  std::string shm_unavailable_;
};

}  // namespace san
