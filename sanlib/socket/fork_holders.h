// OthersHold: whether another process still holds a SAN socket (SanSocket::holders_*, the
// fork-holder pipe of docs/sockets.md "Fork"). Every holder has a read end of the holders pipe
// (fork copies it, close and exec drop it), so with ours closed a write to the pipe fails with
// EPIPE exactly when no other holder is left. Our write end stays open all along, so a holder
// closing meanwhile never takes itself for the last one (socket_ops.cc: DropOwnHold looks for the
// write ends going). The probe bytes are drained once our read end is back.
//
// Only processes that share sanlib's view of the socket count (fork relatives): a process that
// received the kernel socket over SCM_RIGHTS does not. Used before a connection is handed on
// (exec_handoff.h, fd_passing.h). Thread-safety: the caller is the only thread using `s`'s
// holders pipe (it blocks SIGPIPE on its own thread for the probe).
#pragma once

#include "socket/san_socket.h"

namespace san {

bool OthersHold(SanSocket& s);

}  // namespace san
