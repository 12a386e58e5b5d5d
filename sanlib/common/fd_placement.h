// PlaceHigh, PlaceLow: move sanlib's own fds out of the application's way.
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
// fork() pays for that region whenever the process has any fd up there. So the fds a process holds
// whatever its connections (the connection thread's wake-up, the control socket, the log and
// report files, pidfd watches), and a kernel connection's fork-holder pipe while a fork shares it,
// go lower, from 1,024 (the low region): a forking server's parent under sanrun, which holds only
// those, makes every fork copy a table of about 2,048 entries instead of the high region's start.
// (A listener's eager rendezvous stays high: shm_listener.cc says why.)
// At most 64 of ours are there at once (the rest go high), so a program with more than 1,024 fds
// finds at most that many numbers taken among its own, which tables sized by connection count
// plus a margin do not notice; programs that select() never have fds there. Each one placed there
// is recorded (number and file), so close_range and closefrom under sanrun leave it alone.
// Thread-safety: thread-safe. Ownership: takes `fd`, returns the fd to own instead.
#pragma once

#include <sys/resource.h>

#include <vector>

namespace san {

int PlaceHigh(int fd);
// From 1,024 up and recorded (above), or PlaceHigh's place where the limit leaves no room below
// the high region or 64 are there already.
int PlaceLow(int fd);
// True if fd is one PlaceLow placed and still names the file it placed there (the program may
// have closed it behind our back and got the number for a file of its own).
bool IsPlacedLow(int fd);
// True if fd is where sanlib keeps its own: in the high region (HighFdBase) no higher than the
// highest number one of ours took there, or placed low and still ours (IsPlacedLow). An
// application fd among ours up there counts too. No system call.
bool InOwnPlace(int fd);
// The fds PlaceLow placed (as IsPlacedLow) in [first, last], ascending.
std::vector<int> PlacedLowIn(int first, int last);
// Drops fd from PlaceLow's record (KernelClose calls it before closing one of ours: the number
// may be the program's next). No system call.
void ForgetPlacedLow(int fd);
// Where the region begins (sanlib's own fds live at or above it), or -1 when the limit leaves no
// such region (below 1024, or unlimited): then ours are among the application's.
int HighFdBase();
// HighFdBase's rule for a given soft RLIMIT_NOFILE (HighFdBase reads the limit once).
int HighFdBaseFor(rlim_t soft_limit);
// Grows the process's fd table to the high region now, if the process has one thread: the kernel
// grows a table that several threads share only after an RCU grace period (expand_fdtable), which
// took 12-16 ms on the development VM, against about 25 us alone. Called before sanlib starts a
// thread of its own; otherwise the first fd placed high (a connection's segment, at its set-up or
// its move to shm) would wait for it. A process with threads of its own pays it where it first
// places one. The table keeps its size; fork copies only up to the highest open fd.
void GrowFdTableWhileAlone();
// A close-on-exec duplicate of fd, made in the high range directly (no low copy to move), or at
// the lowest free number when there is no room up there; -1 with errno if none can be made.
int DupHigh(int fd);

}  // namespace san
