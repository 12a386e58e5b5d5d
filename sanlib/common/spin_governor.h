// SpinGovernor: how long the calling thread spins before it sleeps, adapted to whether spinning
// pays on this machine right now.
//
// A waiter spins (up to SAN_SPIN_US) because on an idle CPU the peer answers within microseconds
// and a sleep/wake costs more than that. On an oversubscribed host the opposite holds: the spin
// takes the CPU the peer needs to answer, and a round trip waits for the scheduler (drpc measured
// p99 of 3-20 ms against kernel TCP's 0.2 ms at load 4-8 on two CPUs).
//
// The signal is the harm itself: a spin that lasted far past its budget. A spinner yields the CPU
// every few dozen rounds (SpinPause); when another runnable task is there -- a CPU hog, or the
// peer needing this CPU -- the yield (or a preemption) takes a scheduler time slice, milliseconds,
// and the spin's clock shows it. A yield to another spinner, or a brief preemption, costs
// microseconds and is not held against spinning: on two CPUs gRPC's threads swap through their
// yields all the time, and counting those switches (ru_nivcsw, which the first version did) made
// a quiet machine's Ping 2x slower than with SAN_SPIN_ADAPT=off. So each spin that ends -- by
// success or by running out -- reports how long it ran: past the budget by more than kOverrunNs
// (and twice the budget) means contended, and the budget halves, down to none; otherwise a calm
// verdict, and after a spell without any contended one the budget grows back by an eighth of
// SAN_SPIN_US. No system call is involved.
//
// SAN_SPIN_ADAPT=off turns it off (always SAN_SPIN_US).
//
// Thread-safety: the budget is one per process (an atomic, shared by its threads: contention is the
// CPUs', and a program with many waiting threads must not relearn it in each). No locks.
#pragma once

#include <cstdint>

#include "sanlib/common/config.h"

namespace san {

class SpinGovernor {
 public:
  // The spin budget for the calling thread's next wait: at most SAN_SPIN_US, exactly that with
  // SAN_SPIN_ADAPT=off (busy-polling benchmarks).
  static uint64_t BudgetNs(const Config& config);
  // The calling thread's spin ran out, `spun_ns` after it began, and the thread will sleep.
  static void SpinFailed(const Config& config, uint64_t spun_ns);
  // The calling thread's wait ended while it was spinning, `spun_ns` after the spin began.
  static void SpinSucceeded(const Config& config, uint64_t spun_ns);
  // Whether a spin of `spun_ns` against `budget_ns` lost the CPU for a time slice.
  static bool Overran(uint64_t spun_ns, uint64_t budget_ns);
  // The policy alone: the next budget after a failed spin, `contended` or not (max = SAN_SPIN_US).
  static uint64_t NextBudgetNs(uint64_t budget_ns, uint64_t max_ns, bool contended);
};

}  // namespace san
