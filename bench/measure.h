// The measurement schedule of one point (one transport, mode and message size), written once for
// every transport: connect, warm up, measure, turn what was timed into a row.
//
// Time-based by default: a short probe estimates the rate, a warm-up of a tenth of the budget
// settles caches, page mappings and the CPU's frequency, then the measured phase is sized to last
// about `seconds`. With `iters` the measured phase is exactly that many round trips (latency) or
// messages (bandwidth), after a warm-up of a tenth as many. The measured phase runs in 8 chunks;
// the figure is the median of the chunks' (each chunk's mean latency or bandwidth), and a
// time-based point stops after about twice its budget, so a machine where other work steals the
// CPUs makes a point noisier, not endless; it never makes the benchmark fail.
// Thread-safety: none needed (each process is single-threaded).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "transport.h"

namespace san::bench {

struct Schedule {
  uint64_t iters = 0;    // > 0: fixed count per point
  double seconds = 0.4;  // otherwise: measured time per point
};

// One measured figure.
struct Row {
  std::string transport;  // "raw-shm", "sanlib", "sanlib-combine", "tcp", "unix"
  Kind kind = Kind::kLatency;
  Mode mode = Mode::kSpin;
  uint32_t size = 0;
  double value = 0;          // latency: one-way µs (RTT/2); bandwidth: GB/s (10^9 bytes); both the
                             // median over the measured chunks of each chunk's mean
  double p99_us = 0;         // latency only: 99th percentile of sampled one-way times
  uint64_t count = 0;        // round trips or messages measured
  uint64_t preemptions = 0;  // the client's involuntary context switches during the point
  double cpu_us = 0;         // CPU (user + system) of client and server per round trip or
                             // message over the measured chunks, in µs; NAN when not measured
};

// CPU seconds used so far by both processes of a run (client and server), read before and after
// the measured chunks of a point.
using CpuClock = std::function<double()>;

// Client process: measures one point over a fresh connection. Fills value, p99_us, count, cpu_us.
Result<Row> MeasurePoint(Transport& transport, const std::string& address, const Setup& setup,
                         const Schedule& schedule, const CpuClock& cpu);

// Client process: tells the server process it is done.
Status SendQuit(Transport& transport, const std::string& address);

}  // namespace san::bench
