// Managed(fd): the SAN socket behind an fd, for the interposed calls' first question.
//
// nullptr for every fd of a process that has made no SAN socket (the runtime does not exist yet:
// one atomic load), else one lock-free table lookup. Interposed calls on other fds go straight to
// libc (real_calls.h). Thread-safety: as SocketTable::Find.
#pragma once

#include "sanlib/socket/runtime.h"
#include "sanlib/socket/san_socket.h"

namespace san::compat {

inline SanSocket* Managed(int fd) {
  Runtime* rt = Runtime::IfCreated();
  return rt ? rt->table().Find(fd) : nullptr;
}

// A managed socket whose data goes over SAN now (not TCP fallback, not unconnected/listening).
inline SanSocket* ManagedShm(int fd) {
  SanSocket* s = Managed(fd);
  return s && s->mode.load(std::memory_order_acquire) == SocketMode::kShm ? s : nullptr;
}

// A managed socket whose data calls are sanlib's: over SAN now, or a kernel TCP connection that
// may still move to shm (socket/late_upgrade.h), whose reads and writes sanlib must count.
inline SanSocket* ManagedData(int fd) {
  SanSocket* s = Managed(fd);
  return s && SanlibCarries(*s) ? s : nullptr;
}

}  // namespace san::compat
