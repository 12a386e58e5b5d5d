// SpinLock: a process-shared lock that may live in a shared mapping (fork children and peers use
// the same word). Test-and-test-and-set with a pause, yielding the CPU after a short spin so two
// threads on a 2-core machine never starve each other. Not recursive; no owner tracking, so a
// process killed while holding it leaves it held (callers only hold it for bounded, syscall-free
// work, and a stuck lock is detected by TryLockFor's timeout).
// Thread-safety: that is its purpose. Standard layout, zero-initialised = unlocked.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "sanlib/common/clock.h"

namespace san {

class SpinLock {
 public:
  void lock() {
    for (uint32_t spins = 0;; ++spins) {
      if (!word_.load(std::memory_order_relaxed) && !word_.exchange(1, std::memory_order_acquire)) {
        return;
      }
      if (spins < 64) {
        CpuRelax();
      } else {
        sched_yield();
      }
    }
  }
  bool try_lock() {
    return !word_.load(std::memory_order_relaxed) && !word_.exchange(1, std::memory_order_acquire);
  }
  void unlock() { word_.store(0, std::memory_order_release); }

 private:
  std::atomic<uint32_t> word_{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared-memory locks must be lock-free");

}  // namespace san
