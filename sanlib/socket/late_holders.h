// Which processes hold a late-upgrade candidate that a fork shared (late_fork.h), told without a
// file descriptor: a record per candidate in memory that every process forked from this one
// shares (one MAP_SHARED anonymous mapping, made by the first fork that keeps a candidate and
// inherited by every fork after it).
//
// A record lists the holders' pids. The prepare handler makes the record (the forking process
// its first holder) and reserves an entry for the child-to-be; the child's handler writes its pid
// there. A process lets go when it closes its copy (Leave, from ~LateUpgrade) or when it finds
// itself the only holder. A process that ended without closing (exit, SIGKILL) is found out by
// its pid (kill(pid, 0): ESRCH) and its entry dropped.
//
// Why not the fork-holder pipe of SAN channels (fork_holders.h): its two fds, placed from 1,024
// up so that the program's own numbers stay free, made every fork of an accept-then-fork server
// copy a fd table of more than a thousand entries, and the pipe cost ten system calls per
// connection (what that cost `conn-bench churn --server fork` was within this VM's noise:
// docs/compat.md "What sanrun costs a process"). And a pid outlives exec: a child that execs a
// program holding the socket (inetd) still holds it, where the pipe (close-on-exec) said it let
// go.
//
// What it gives up on the safe side (the connection stays TCP): a reservation whose fork failed,
// or whose child was killed before its first instruction, counts as a holder for good; a pid
// reused by an unrelated process counts as a holder until that process ends; a holder that
// closed its copy behind sanlib's back (a raw system call) counts until it ends. What it does not
// see (as the pipe did not): a holder that no fork handler of ours listed -- a raw clone()'s
// child, a vfork child (a posix_spawn/system/popen child that holds it ends the move first:
// compat/interpose_spawn.cc), a child of a program exec'd with the socket, a child whose
// fork found the candidate busy (a step under way in another thread) or 256 candidates kept
// already -- holds the socket without being counted, and once every listed holder let go the
// last one moves the connection under it.
//
// Thread-safety: the record's entries are atomics written by several processes; a LateUpgrade's
// own fields are the caller's (its step lock, or the fork handlers of a process alone).
#pragma once

#include <sys/types.h>

namespace san {

struct LateUpgrade;

namespace late_holders {

// LateUpgrade::holders_record: none yet (no fork shared the candidate, or every other holder let
// go), or the holders are unknown (Reserve failed: some other process may hold it, for good).
constexpr int kNoRecord = -1;
constexpr int kUnknown = -2;

// The prepare handler, for a candidate it keeps: records the forking process as a holder (if
// the candidate has no record yet) and reserves an entry for the child. False if no record or
// entry could be had (the mapping failed, every record in use by live processes, or seven live
// holders already): the holders are then unknown, OthersHold says yes for good (to every holder
// the record lists), and the child must not keep the candidate (it has no entry).
bool Reserve(LateUpgrade& u, pid_t self);
// The child's handler: it takes the entry its parent reserved.
void TakeReservation(LateUpgrade& u, pid_t self);
// Whether a process other than `self` still holds the candidate (entries of ended processes are
// dropped on the way).
bool OthersHold(LateUpgrade& u, pid_t self);
// `self` lets go (its copy closed, or it holds it alone and may move it): its entry goes, and the
// record with it once no holder is left.
void Leave(LateUpgrade& u, pid_t self);

}  // namespace late_holders
}  // namespace san
