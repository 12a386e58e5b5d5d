// Late upgrade candidates across fork() (late_upgrade.h): a connection that starts on kernel TCP
// moves to shm only while one process holds it, and that is the process that moves it.
//
// The accept-then-fork server (PostgreSQL, socat fork, inetd's nowait services, classic forking
// servers) accepts, forks a child to serve the connection and closes its own copy. The child is
// then the only holder and moves the connection at its time, as an accepting process would.
// Until then neither process moves it: a process that moved a connection the other still uses
// would leave that one writing bytes nobody reads.
//
// How: the fork's prepare handler records every candidate still waiting (nothing made yet) among
// the fork relatives' holders records (late_holders.h: the forking process, and an entry the
// child takes in its handler; no fd) and holds its step lock across the fork, so both copies of
// its state are whole. After the fork both processes keep those candidates, marked `forked`: a
// step looks at the record (OthersHold: a kill(pid, 0) per other holder, at most every
// kHoldRecheck) and goes on only once no other process holds the connection. The child gives up
// every other candidate (a set-up under way belongs to the parent). (Until 2026-11-29 the record
// was a fork-holder pipe, as SAN channels have: fork_holders.h; late_holders.h says why not.)
//
// A process that never ran a second thread (`alone`: no step can be under way in another thread)
// takes no step lock across the fork, so that neither process writes the lock's page after it
// (a copy-on-write fault each); the records are made all the same.
//
// Thread-safety: KeepAcrossFork and AfterLateFork run in the fork handlers (runtime.cc), the
// former under the socket table's exclusive lifetime lock (no socket closes meanwhile) unless
// alone; SoleHolder under the candidate's step lock.
#pragma once

#include <cstdint>

#include "sanlib/socket/san_socket.h"

namespace san {

// The prepare handler's first step (forgets the last fork's candidates), then its visit of each
// socket: a candidate still waiting is kept (its step lock held until AfterLateFork, unless
// alone).
void BeginLateFork();
void KeepAcrossFork(SanSocket* s, bool alone);
// The parent's and the child's handler (the child's after the socket table is usable again).
void AfterLateFork(bool child, bool alone);

// Whether a candidate that came through a fork may take its next step: true once no other
// process holds it (then it is an ordinary candidate again). mu held.
bool SoleHolder(SanSocket& s, uint64_t now_ns);
// Before an exec that closes every number of a candidate (close-on-exec): this process holds it
// no more. (socat's fork children fork and exec the program of its EXEC address, the connection
// close-on-exec: without this the socat child would wait for the program to end before it moved
// its connection.) Skipped while a step holds the candidate (the process stays counted: the
// safe side). If the exec fails, the process holds the socket unlisted: it never moves it
// itself (its holders are unknown to it), and the other holders no longer count it (a program
// whose exec failed normally ends).
void LetGoAtExec(SanSocket& s);

}  // namespace san
