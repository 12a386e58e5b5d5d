// Monotonic time in nanoseconds, timeouts in poll's milliseconds, a blocking call's timeout
// budget, a CPU-friendly spin hint and a spinning waiter's pause. Used by spin-then-block loops,
// timers and benchmarks. Thread-safe (no shared state).
#pragma once

#include <limits.h>
#include <sched.h>
#include <sys/time.h>
#include <time.h>

#include <cstdint>

namespace san {

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A timeout as poll's milliseconds, rounded up (never shorter than asked) and capped at INT_MAX;
// -1 for none (a null pointer). The caller has rejected negative fields.
inline int TimeoutMs(const timespec* ts) {
  if (!ts) return -1;
  const long long ms = ts->tv_sec * 1000LL + (ts->tv_nsec + 999999) / 1000000;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}
inline int TimeoutMs(const timeval* tv) {
  if (!tv) return -1;
  const timespec ts{tv->tv_sec, tv->tv_usec * 1000};
  return TimeoutMs(&ts);
}

// One blocking call's timeout in poll's milliseconds (-1 = none), counted from construction.
// (The spin before a sleep is the socket layer's SpinThenSleep.)
class WaitBudget {
 public:
  explicit WaitBudget(int timeout_ms) : timeout_ms_(timeout_ms), start_(NowNs()) {}
  // Milliseconds left for a sleep: -1 without a timeout, 0 once it has passed.
  int remaining_ms() const {
    if (timeout_ms_ < 0) return -1;
    const uint64_t elapsed_ms = (NowNs() - start_) / 1000000;
    return elapsed_ms >= static_cast<uint64_t>(timeout_ms_)
               ? 0
               : timeout_ms_ - static_cast<int>(elapsed_ms);
  }

 private:
  int timeout_ms_;
  uint64_t start_;
};

// The shorter of two sleeps in milliseconds, -1 being no limit (poll's and epoll_wait's sense).
inline int SoonerMs(int a, int b) { return a < 0 ? b : b < 0 ? a : (a < b ? a : b); }

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// The pause of a spinning waiter: a CPU hint each time, and every kYieldEvery-th time a
// sched_yield(), so that a peer runnable on this same CPU (a busy or oversubscribed host, a
// one-CPU container) runs now rather than after our spin budget is spent -- without it, two
// spinning peers on one CPU each burn their whole budget per message. On an otherwise idle CPU
// the yield returns at once: one syscall per ~1-2 us of spinning. One per waiting loop.
class SpinPause {
 public:
  static constexpr uint32_t kYieldEvery = 32;
  void operator()() {
    if (++count_ % kYieldEvery == 0) {
      sched_yield();
    } else {
      CpuRelax();
    }
  }

 private:
  uint32_t count_ = 0;
};

}  // namespace san
