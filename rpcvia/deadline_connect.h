// Deadlines and connecting by one, for the via transport: a create's timeout covers the rpcbind
// lookup and the connect, a call's timeout its send and reply.
// Thread-safety: plain functions. Works on SAN sockets and plain kernel sockets alike (sanlib's
// calls pass the latter to the kernel).
#pragma once

#include <sys/socket.h>
#include <sys/time.h>

#include <cstdint>

namespace san::rpcvia {

// CLOCK_MONOTONIC nanoseconds (san::NowNs) `tv` from now.
uint64_t DeadlineAfter(const timeval& tv);

// Connects the nonblocking socket `fd` to `addr` by `deadline_ns`. 0, ETIMEDOUT, or the errno of
// the connect (or of waiting for it).
int ConnectBy(int fd, const sockaddr* addr, socklen_t len, uint64_t deadline_ns);

}  // namespace san::rpcvia
