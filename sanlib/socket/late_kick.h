// late_kick: wakes this process's threads asleep in the kernel's epoll_wait on late candidates
// (late_upgrade.h) when a move may have begun or ended, or a socket settled (late_phase.h), so
// that such a thread sleeps as long as it was asked to instead of in naps.
//
// Why a sleeper must be woken: a candidate's move may be taken by another thread's call (or the
// connection thread) while a thread sleeps on the candidate's kernel registration, which may then
// never fire again (the peer's wake byte read elsewhere, its edge reported already). Sleepers used
// to nap every kLateNapMs and look again whatever happened: an idle epoll server holding 1,000
// candidates woke 200 times a second for nothing.
//
// How: while no move of the process is under way (LateQuiet), a sleeper registers the process's
// kick -- one eventfd, edge-triggered in each epoll instance that sleeps on candidates, with the
// data EpollSet::DropKicks removes; a poll sleeper (san_poll) its own wake-up eventfd in
// PollSleepers, polled with the program's fds -- counts itself (Sleeper) and sleeps for its whole
// timeout.
// Every phase change and settle (late_phase.h) writes the kick while anyone is counted, which ends
// those sleeps; a sleeper then looks at its set again, and naps only while a move is under way.
// No kick is lost: a sleeper counts itself before it reads LateQuiet, a change is published before
// the count is read (seq_cst both), and an edge written before a sleep starts is still reported
// to it (the instance keeps the kick ready until an epoll_wait reports it).
//
// A fork child makes a kick of its own at its first use (the parent's is the same file: it would
// wake the parent's sleepers in vain), and counts from zero.
// Thread-safety: all functions are thread-safe.
#pragma once

#include "sanlib/socket/waiter_set.h"

namespace san::late_kick {

// The process's kick eventfd, made on first use (close-on-exec, nonblocking, in sanlib's high fd
// range); -1 if none could be made (sleepers nap then, as before).
int Fd();

// The poll sleepers' wake-up eventfds (waiter_set.h), rung with the kick.
WaiterSet& PollSleepers();

// Counts the calling thread among the kick's sleepers while it lives: made before the sleeper
// reads LateQuiet, destroyed when its sleep ends.
class Sleeper {
 public:
  Sleeper();
  ~Sleeper();
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
};

}  // namespace san::late_kick
