// The fd budget of SAN channels: sanlib does not make a process run out of fds.
//
// A channel holds kFdsPerChannel fds in each process it joins (shm: the segment's memfd, two
// doorbells, the rendezvous socket, an epoll set), beside the kernel socket the program has
// anyway, and a fork-holder pipe's two where it has one (san_socket.h holders_*: every channel
// made at connect or accept, a moved one once a fork shared it), counted apart. With 10,000
// connections between two processes that was 70,000 fds each (7 per channel then): under a limit of
// 20,000 the program's own socket() failed with EMFILE after some 2,800 connections, where kernel
// TCP alone held all 10,000 (conn-bench hold, eager). So a new channel is made only while the
// process's channels hold less than a quarter of its fd limit (RLIMIT_NOFILE, read at each check:
// programs raise it as they start, as nginx's worker_rlimit_nofile does); past it a connection is
// kernel TCP with the reason, and three quarters of the limit stay the program's. What is not
// covered: a program that by itself uses more than three quarters of its limit can still meet
// EMFILE sooner than without sanlib (by the channels' fds, at most a quarter); its socket() and
// accept() then release sanlib's rendezvous first (socket_ops.cc RetryAfterFreeingFds).
//
// History: the pipe was made with every channel and counted in kFdsPerChannel (7); nginx
// keep-alive under wrk -c 1000 (both late, limit 20,000) then held 714 of its 1,000 connections
// on shm, and all 1,000 since its moved channels have no pipe (nginx's worker never forks).
//
// A late upgrade's lower end (late_upgrade.h) counts the private rendezvous it opens as the channel
// it becomes once its peer comes, so that every side opened has room for its channel.
//
// Thread-safety: stateless (the count is proto::Stream::live()); two threads may both pass the
// check for the last channel that fits, which the quarter's margin absorbs.
#pragma once

#include <cstddef>
#include <string>

namespace san {

constexpr size_t kFdsPerChannel = 5;
constexpr size_t kFdsPerHoldersPipe = 2;

// A fork-holder pipe made (+1) or gone with its socket (-1).
void CountHoldersPipes(int delta);

// True if one more channel fits in this process's budget; otherwise false with the reason (the
// socket's fallback reason).
bool ChannelFitsFdBudget(std::string* why);

// Whether a late upgrade's lower end may open its side (its private rendezvous, late_upgrade.h),
// counted as the channel it becomes once its peer comes, with the `open` sides open already:
// kOpen; kWait while those would fill the budget (it waits its turn: one of them becomes a
// channel or closes); kFull once the live channels alone fill it, with the reason.
enum class LateSideRoom { kOpen, kWait, kFull };
LateSideRoom RoomForLateSide(size_t open, std::string* why);

}  // namespace san
