// PrepareToPass: what happens to a SAN connection whose fd goes to another process: over
// SCM_RIGHTS (compat/interpose_io.cc calls it from sendmsg/sendmmsg on any socket, before the
// kernel passes the fds), or to a child that glibc starts and execs by itself (posix_spawn,
// system, popen: compat/interpose_spawn.cc, before the spawn), where no exec of ours runs.
//
// The receiver gets the kernel socket only: a SAN connection's bytes travel over a stream whose
// state is in this process, so a receiver writing to the kernel socket writes to a TCP connection
// the peer no longer reads, and the peer's bytes never reach it (vsftpd with isolate=NO, whose
// privileged helper hands sockets to the session, truncated a 20 MB download at 3.9 MB). So a
// connected SAN socket being passed moves to its kernel TCP socket on both ends first, at the
// offsets both agree on (tcp_move.h, the move an exec into an image without sanlib makes): the
// receiver, sanlib or not, gets a plain TCP connection with no byte lost, doubled or reordered,
// and the sender's copy is that same TCP connection. A connection still on kernel TCP that might
// move to shm later (late_upgrade.h) stays TCP for good (or, if its move was under way, finishes
// it and then moves back).
//
// A connection that cannot move -- another process of ours holds it too (a fork relative keeps
// using the stream), another thread is asleep on it, both ends are in this process, or the peer
// did not answer within tcp_move's 1 s -- is passed as it is, with a warning: the receiver's
// kernel socket then carries nothing (a known limit, docs/compat.md).
//
// Thread-safety: runs on the sending thread; the table is pinned meanwhile.
#pragma once

#include <cstddef>
#include <vector>

namespace san {

// Settles the connections of `fds` (other fds are left alone) before another process gets them;
// `via` names how ("SCM_RIGHTS", "posix_spawn"), for the reason and the log.
void PrepareToPass(const int* fds, size_t count, const char* via);

// An fd of this process that names a connection PrepareToPass would settle (connected, not
// listening: on shm, or still on kernel TCP that may move there), and whether it is close-on-exec.
struct PassableFd {
  int fd;
  bool cloexec;
};
// Every such fd, in no particular order; none in a process that never made a SAN socket.
std::vector<PassableFd> PassableFds();

}  // namespace san
