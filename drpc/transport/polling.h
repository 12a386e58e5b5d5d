// Which gRPC polling engine a drpc program runs on; chosen once, first thing in main(), before
// anything starts gRPC (it reads GRPC_POLL_STRATEGY when it initialises).
//
// Why not gRPC's default on Linux (epoll1): it registers every socket edge-triggered for
// EPOLLIN | EPOLLOUT. An idle connection is writable, and compat's epoll_wait, asked to sleep,
// re-checks its SAN members' *level* readiness before arming the doorbells: a writable SAN socket
// counts as ready, the edge was already reported, nothing is returned, and the loop goes round
// again without ever sleeping -- every gRPC thread waiting on a SAN connection spins a CPU
// (measured: a SAN client waiting 3 s for Exec output used 0.8 s CPU, its drpcd 0.7 s, at load 6;
// over TCP none). That is compat's to fix (docs/drpc.md, problem 4); until then drpc uses gRPC's
// "poll" engine with SAN on: it asks POLLOUT only while it has bytes to send, so compat's poll
// sleeps on the doorbell as it should (0.02 s CPU for the same wait).
// Rule: GRPC_POLL_STRATEGY set by the user wins; otherwise "poll" unless SAN_PROVIDER=off, in
// which case gRPC keeps its default -- plain gRPC as anybody runs it, which is also what
// drpc-bench's kernel-TCP baseline runs (its TCP pair has SAN_PROVIDER=off).
// Thread-safety: call before other threads exist (setenv).
#pragma once

namespace san::drpc {

// Returns the engine chosen ("" = gRPC's default).
const char* SelectPollingEngine();

}  // namespace san::drpc
