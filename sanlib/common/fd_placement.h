// PlaceHigh: moves one of sanlib's own fds to the top of the fd space, out of the application's
// way.
//
// A SAN connection holds several fds of its own (segment, doorbells, fork holders...). Taken from
// the lowest free numbers they would sit between the application's sockets, and programs that size
// their tables by their own connection count (redis's and wrk's event loops: a few slots per
// connection) would meet socket numbers they cannot handle. So sanlib's long-lived fds are moved to
// the top quarter of RLIMIT_NOFILE (read once), or from 16,384 up where the limit is higher than
// 21,845: fork() copies the fd table up to the highest open fd, so the region's start is what every
// fork of the process pays (a quarter below a container's 1,048,576 would be a 6 MiB table per
// fork). An fd that cannot move (no room, or a limit below 1024) stays where it is. The result is
// close-on-exec.
// Thread-safety: thread-safe. Ownership: takes `fd`, returns the fd to own instead.
#pragma once

#include <sys/resource.h>

namespace san {

int PlaceHigh(int fd);
// Where the region begins (sanlib's own fds live at or above it), or -1 when the limit leaves no
// such region (below 1024, or unlimited): then ours are among the application's.
int HighFdBase();
// HighFdBase's rule for a given soft RLIMIT_NOFILE (HighFdBase reads the limit once).
int HighFdBaseFor(rlim_t soft_limit);
// A close-on-exec duplicate of fd, made in the high range directly (no low copy to move), or at
// the lowest free number when there is no room up there; -1 with errno if none can be made.
int DupHigh(int fd);

}  // namespace san
