// PrepareToPass: what happens to a SAN connection whose fd goes to another process over
// SCM_RIGHTS (compat/interpose_io.cc calls it from sendmsg/sendmmsg on any socket, before the
// kernel passes the fds).
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

namespace san {

void PrepareToPass(const int* fds, size_t count);

}  // namespace san
