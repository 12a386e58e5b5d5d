// The name of a sanlib process's control socket: the abstract Unix socket "\0sanlib/ctl/<pid>"
// (network-namespace scoped, gone with the process). Served by the process's connection thread
// (socket/control_service.h); used by sanstat and by the channel handover (socket/handover.h).
// Thread-safety: pure function.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdio>

namespace san {

constexpr char kControlPrefix[] = "sanlib/ctl/";  // as listed in /proc/net/unix: "@sanlib/ctl/<pid>"

inline socklen_t ControlSocketName(int pid, sockaddr_un* sun) {
  *sun = sockaddr_un{};
  sun->sun_family = AF_UNIX;
  const int n = snprintf(sun->sun_path + 1, sizeof sun->sun_path - 1, "%s%d", kControlPrefix, pid);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

}  // namespace san
