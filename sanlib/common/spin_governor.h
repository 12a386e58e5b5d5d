// SpinGovernor: how long the calling thread spins before it sleeps, adapted to whether spinning
// pays on this machine right now.
//
// A waiter spins (up to SAN_SPIN_US) because on an idle CPU the peer answers within microseconds
// and a sleep/wake costs more than that. On an oversubscribed host the opposite holds: the spin
// takes the CPU the peer needs to answer, and a round trip waits for the scheduler (drpc measured
// p99 of 3-20 ms against kernel TCP's 0.2 ms at load 4-8 on two CPUs). The signal used is the
// thread's involuntary context switches (getrusage RUSAGE_THREAD ru_nivcsw): they grow only when
// another runnable task took or was given this CPU -- preemption, or SpinPause's sched_yield
// finding someone to run. Each time a spin ends without success (the thread is about to sleep
// anyway, so one more system call is cheap there) the governor compares the count with the last
// look (and a spin that ended successfully but far past its budget -- its sched_yield handed the
// CPU to someone for a time slice -- counts as contended too): grown means contended, and the
// budget halves, down to none; unchanged means the CPU was ours, and it grows back by an eighth of
// SAN_SPIN_US. A spin that succeeds costs nothing extra.
//
// SAN_SPIN_ADAPT=off turns it off (always SAN_SPIN_US).
//
// Thread-safety: the budget is one per process (an atomic, shared by its threads: contention is the
// CPUs', and a program with many waiting threads must not relearn it in each); the switch counts
// compared are each thread's own (thread_local). No locks.
#pragma once

#include <cstdint>

#include "common/config.h"

namespace san {

class SpinGovernor {
 public:
  // The spin budget for the calling thread's next wait: at most SAN_SPIN_US, exactly that with
  // SAN_SPIN_ADAPT=off (busy-polling benchmarks).
  static uint64_t BudgetNs(const Config& config);
  // The calling thread's spin ran out and it will sleep: adapts the budget (one getrusage).
  static void SpinFailed(const Config& config);
  // The calling thread's wait ended while it was spinning, `spun_ns` after the spin began: a spin
  // that overran its budget had given the CPU away (its sched_yield), which counts as contention.
  static void SpinSucceeded(const Config& config, uint64_t spun_ns);
  // The policy alone: the next budget after a failed spin, `contended` or not (max = SAN_SPIN_US).
  static uint64_t NextBudgetNs(uint64_t budget_ns, uint64_t max_ns, bool contended);
};

}  // namespace san
