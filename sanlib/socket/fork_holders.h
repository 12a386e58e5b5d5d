// Whether a SAN connection is this thread's alone to hand on (exec_handoff.h, fd_passing.h):
//   MayHandOn   no other thread of ours sleeps on it, and its fork-holders are known (its pipe
//               exists, or it never needed one: a moved connection no fork shared);
//   OthersHold  another process still holds it;
//   PeerIsOurs  its other end is a socket of this process too (it could not answer a move while
//               this thread waits for the answer).
//
// OthersHold: whether another process still holds a SAN socket (SanSocket::holders_*, the
// fork-holder pipe of docs/sockets.md "Fork"). Every holder has a read end of the holders pipe
// (fork copies it, close and exec drop it), so with ours closed a write to the pipe fails with
// EPIPE exactly when no other holder is left. Our write end stays open all along, so a holder
// closing meanwhile never takes itself for the last one (socket_ops.cc: DropOwnHold looks for the
// write ends going). The probe bytes are drained once our read end is back.
//
// Only processes that share sanlib's view of the socket count (fork relatives): a process that
// received the kernel socket over SCM_RIGHTS does not. A raw clone's child (no fork handler ran)
// counts only where the pipe was made before it: at connect or accept, not for a moved connection
// that no fork had shared yet (the one gap of making those pipes at the fork). Used before a
// connection is handed on (exec_handoff.h, fd_passing.h). Thread-safety: the caller is the only
// thread using `s`'s holders pipe (it blocks SIGPIPE on its own thread for the probe).
//
// HoldAcrossFork: the fork prepare handler's visit of each socket (runtime.cc, under the socket
// table's exclusive lock unless the process is alone): marks a SAN connection `fork_shared`; one
// without a pipe (moved to shm after it connected, socket_ops.cc Settle) gets one now, before the
// fork copies it, so both processes hold its ends; if none can be made (no fd left) the holders
// are counted instead (proto::Stream users) and the connection is never handed on.
#pragma once

#include "sanlib/socket/san_socket.h"
#include "sanlib/socket/socket_table.h"

namespace san {

bool MayHandOn(const SanSocket& s);
void HoldAcrossFork(SanSocket* s);
bool OthersHold(SanSocket& s);
bool PeerIsOurs(SocketTable& table, SanSocket& s);

}  // namespace san
