// conn-bench hold: many connections at once between two processes. The client opens N connections
// one after the other (timed), then sends one byte on every one and reads every echo (checked);
// the server accepts them all and echoes each. Both count their fds and read their memory
// (smaps_rollup) before and after; the coordinator reads the host's kernel slab around it. Per
// connection: fds, RSS, PSS, slab, and connections per GiB. The server then times an
// epoll_wait(0) over all its connections, none ready: what idle connections cost an event loop.
#pragma once

#include <string>

#include "transport.h"

namespace san::connbench {

struct HoldParams {
  long connections = 10000;
  int timeout_s = 120;  // the whole measurement; beyond it the run is hung
};

struct HoldResult {
  bool failed = false;
  std::string failure;
  std::string note;  // the fd-limit cap, the first error, a fallback reason
  long wanted = 0;
  long established = 0;  // connected, and carried a byte both ways
  long shm = 0;          // of them, client end on shared memory
  long errors = 0;
  double establish_s = 0;         // the client's N connects
  double echo_s = 0;              // one byte both ways on every connection
  double close_s = 0;             // the client closing them all
  double fds_per_conn = 0;        // client + server
  double rss_kib_per_conn = 0;    // client + server
  double pss_kib_per_conn = 0;    // client + server (shared pages counted once)
  double shmem_kib_per_conn = 0;  // the shared-memory part of that Pss
  double slab_kib_per_conn = 0;   // kernel slab growth, host-wide
  double conns_per_gib = 0;       // 2^30 / (pss + slab per connection)
  double cpu_us_per_conn = 0;     // both processes, whole run (set-up, echo, close)
  double idle_wait_us = 0;  // the server's epoll_wait(0) over all of them, none ready (-1: failed)
};

HoldResult RunHold(const Calls& calls, const HoldParams& params);

}  // namespace san::connbench
