// Monotonic time in nanoseconds, and a CPU-friendly spin hint. Used by spin-then-block loops,
// timers and benchmarks. Thread-safe (no state).
#pragma once

#include <time.h>

#include <cstdint>

namespace san {

inline uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace san
