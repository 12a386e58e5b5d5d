// Monotonic time in nanoseconds, a spin-then-sleep call's time budget, and a CPU-friendly spin
// hint. Used by spin-then-block loops, timers and benchmarks. Thread-safe (no shared state).
#pragma once

#include <time.h>

#include <cstdint>

namespace san {

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// One blocking call's time: a timeout in poll's milliseconds (-1 = none) and a spin phase before
// the call sleeps (SAN_SPIN_US), both counted from construction.
class WaitBudget {
 public:
  WaitBudget(int timeout_ms, uint32_t spin_us)
      : timeout_ms_(timeout_ms), start_(NowNs()), spin_end_(start_ + uint64_t{spin_us} * 1000) {}
  // Milliseconds left for a sleep: -1 without a timeout, 0 once it has passed.
  int remaining_ms() const {
    if (timeout_ms_ < 0) return -1;
    const uint64_t elapsed_ms = (NowNs() - start_) / 1000000;
    return elapsed_ms >= static_cast<uint64_t>(timeout_ms_)
               ? 0
               : timeout_ms_ - static_cast<int>(elapsed_ms);
  }
  bool spinning() const { return NowNs() < spin_end_; }

 private:
  int timeout_ms_;
  uint64_t start_;
  uint64_t spin_end_;
};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace san
