// SpinThenSleep: the waiting engine of every blocking call on SAN sockets -- the data calls
// (drive.h Drive), poll (poll.cc) and epoll_wait (epoll_set.cc EpollSet::Wait).
//
// A call looks for what it waits for (a stream operation, its members' readiness); each time a
// look finds nothing it asks Spin(): keep spinning (it paused: look again), or sleep now (the
// caller checks its timeout, sleeps on the doorbells, calls Woke() and looks again; from then on
// a miss sleeps again after at most `looks_after_wake` more looks). The spin lasts the budget the
// SpinGovernor grants (SAN_SPIN_US at most), counted from the first miss, and the governor hears
// once per call whether it paid off: Found() while spinning, or the spin running out. A look is
// tens of nanoseconds, so the clock is read only every kClockEvery-th miss. A call whose timeout
// is 0 returns after its first look, before any Spin().
//
// Thread-safety: one per call, on the calling thread's stack.
#pragma once

#include <cstdint>

#include "sanlib/common/clock.h"
#include "sanlib/common/config.h"
#include "sanlib/common/spin_governor.h"

namespace san {

class SpinThenSleep {
 public:
  static constexpr uint32_t kClockEvery = 8;

  // `timeout_ms` (poll's: -1 = none): the spin never outlasts the call's timeout.
  // `looks_after_wake`: after each sleep, how many misses pause and look again before the next
  // sleep. The data calls take a few (kLooksAfterWake): what woke them is often followed by what
  // they wait for within a microsecond -- a sender woken for one credit needs the next, a receiver
  // the rest of a burst --, and a sleep each time would cost a doorbell write on the other side.
  // poll and epoll take none: one of their looks can be a pass over many members.
  static constexpr uint32_t kLooksAfterWake = 16;
  explicit SpinThenSleep(const Config& config, int timeout_ms = -1, uint32_t looks_after_wake = 0)
      : config_(config),
        spin_ns_(SpinBudget(config, timeout_ms)),
        looks_after_wake_(looks_after_wake) {}

  // A look found nothing. True: go on spinning (paused already; look again). False: sleep now --
  // the first time, the governor hears the spin failed.
  bool Spin() {
    if (sleeping_) {
      if (looks_left_ == 0) return false;
      --looks_left_;
      pause_();
      return true;
    }
    if (first_miss_ns_ != 0 && ++misses_ % kClockEvery != 0) {
      pause_();
      return true;
    }
    const uint64_t now = NowNs();
    if (first_miss_ns_ == 0) first_miss_ns_ = now;
    if (now - first_miss_ns_ < spin_ns_) {
      pause_();
      return true;
    }
    SpinGovernor::SpinFailed(config_, now - first_miss_ns_);
    sleeping_ = true;
    return false;
  }
  // The caller slept and is about to look again.
  void Woke() { looks_left_ = looks_after_wake_; }
  // A look found what the call waits for: a spin that paid off is reported.
  void Found() {
    if (first_miss_ns_ != 0 && !sleeping_) {
      SpinGovernor::SpinSucceeded(config_, NowNs() - first_miss_ns_);
    }
  }
  // NowNs() at the first miss; 0 before it.
  uint64_t first_miss_ns() const { return first_miss_ns_; }

 private:
  static uint64_t SpinBudget(const Config& config, int timeout_ms) {
    const uint64_t budget = SpinGovernor::BudgetNs(config);
    if (timeout_ms < 0) return budget;
    const uint64_t timeout_ns = static_cast<uint64_t>(timeout_ms) * 1000000;
    return budget < timeout_ns ? budget : timeout_ns;
  }

  const Config& config_;
  const uint64_t spin_ns_;
  const uint32_t looks_after_wake_;
  uint32_t looks_left_ = 0;
  uint64_t first_miss_ns_ = 0;
  uint32_t misses_ = 0;
  bool sleeping_ = false;
  SpinPause pause_;
};

}  // namespace san
