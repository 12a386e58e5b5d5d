// SpinGovernor: the policy (halve to none under contention, double back to SAN_SPIN_US without),
// and the signal, for real: a thread that shares its CPU with a busy sibling sees involuntary
// switches and stops spinning; SAN_SPIN_ADAPT=off keeps the configured spin whatever happens.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "common/config.h"
#include "common/spin_governor.h"

namespace san {
namespace {

TEST(SpinGovernorTest, HalvesToNoneUnderContentionAndDoublesBackWithout) {
  const uint64_t max = 50000;
  uint64_t b = max;
  b = SpinGovernor::NextBudgetNs(b, max, true);
  EXPECT_EQ(b, 25000u);
  for (int i = 0; i < 20; ++i) b = SpinGovernor::NextBudgetNs(b, max, true);
  EXPECT_EQ(b, 0u);
  b = SpinGovernor::NextBudgetNs(b, max, false);  // comes back slowly, not at once
  EXPECT_EQ(b, max / 8);
  for (int i = 0; i < 6; ++i) b = SpinGovernor::NextBudgetNs(b, max, false);
  EXPECT_EQ(b, 7 * max / 8);
  for (int i = 0; i < 20; ++i) b = SpinGovernor::NextBudgetNs(b, max, false);
  EXPECT_EQ(b, max);
  EXPECT_EQ(SpinGovernor::NextBudgetNs(0, 0, false), 0u);  // SAN_SPIN_US=0 stays 0
}

// Runs `body` on a thread pinned to CPU `cpu`, with a busy sibling pinned to the same CPU.
void OnASharedCpu(int cpu, const std::function<void()>& body) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  std::atomic<bool> stop{false};
  std::atomic<bool> hogging{false};
  std::thread hog([&] {
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    hogging = true;  // from now on it only runs on that CPU
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  std::thread worker([&] {
    ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    while (!hogging.load()) sched_yield();
    body();
  });
  worker.join();
  stop = true;
  hog.join();
}

TEST(SpinGovernorTest, AThreadSharingItsCpuStopsSpinning) {
  Config config;
  config.spin_us = 50;
  uint64_t budget = 0;
  OnASharedCpu(sched_getcpu() < 0 ? 0 : sched_getcpu(), [&] {
    EXPECT_EQ(SpinGovernor::BudgetNs(config), 50000u);  // a fresh thread starts at the maximum
    for (int i = 0; i < 40; ++i) {
      // The hog is runnable on this CPU: each yield hands it the CPU (an involuntary switch).
      for (int k = 0; k < 3; ++k) sched_yield();
      SpinGovernor::SpinFailed(config);
    }
    budget = SpinGovernor::BudgetNs(config);
  });
  // Nearly every look finds a switch; the odd quiet one adds an eighth back.
  EXPECT_LE(budget, 50000u / 4);
}

TEST(SpinGovernorTest, OffKeepsTheConfiguredSpin) {
  Config config;
  config.spin_us = 50;
  config.spin_adapt = false;
  uint64_t budget = 0;
  OnASharedCpu(0, [&] {
    for (int i = 0; i < 40; ++i) {
      for (int k = 0; k < 3; ++k) sched_yield();
      SpinGovernor::SpinFailed(config);
    }
    budget = SpinGovernor::BudgetNs(config);
  });
  EXPECT_EQ(budget, 50000u);
}

}  // namespace
}  // namespace san
