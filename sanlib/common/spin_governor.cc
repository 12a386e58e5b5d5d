#include "sanlib/common/spin_governor.h"

#include <algorithm>
#include <atomic>

#include "sanlib/common/clock.h"

namespace san {
namespace {

// Down fast, up slowly: contention halves the budget (below kFloorNs it is none); growth adds
// 1/kSteps of SAN_SPIN_US. At none, a wait sleeps at once and so learns nothing: the spin is
// tried again, at 1/kSteps, only after kProbeAfterNs -- a probe can cost a hog's time slice (the
// spin's sched_yield hands it the CPU), so it must be rare.
constexpr uint64_t kFloorNs = 1000;
constexpr uint64_t kSteps = 8;
constexpr uint64_t kProbeAfterNs = 50'000'000;
// A spin past its budget by more than this lost the CPU for a scheduler time slice (0.75 ms and
// up on Linux); less is a yield to another spinner, a short preemption, or the granularity of the
// spin's clock (read every few dozen rounds), none of which makes spinning a loss.
constexpr uint64_t kOverrunNs = 250'000;

// The budget is the process's, shared by its threads: contention is a property of the CPUs, and a
// program with many waiting threads (gRPC's) must not relearn it in each.
constexpr uint64_t kUnset = ~uint64_t{0};
std::atomic<uint64_t> shared_budget_ns{kUnset};
std::atomic<uint64_t> none_since_ns{0};    // when the budget dropped to none
std::atomic<uint64_t> contended_at_ns{0};  // the last contended verdict, from any thread
// Growth needs this long without any thread seeing contention: under sustained load most spins
// still end in time, and those must not vote the budget back up between the ones that do not.
constexpr uint64_t kCalmNs = 20'000'000;

uint64_t Budget(uint64_t max_ns) {
  uint64_t b = shared_budget_ns.load(std::memory_order_relaxed);
  if (b == kUnset) {
    shared_budget_ns.compare_exchange_strong(b, max_ns, std::memory_order_relaxed);
    b = shared_budget_ns.load(std::memory_order_relaxed);
  }
  return std::min(b, max_ns);
}

void SetBudget(uint64_t b) {
  shared_budget_ns.store(b, std::memory_order_relaxed);
  if (b == 0) none_since_ns.store(NowNs(), std::memory_order_relaxed);
}

// A verdict on the budget (max_ns = SAN_SPIN_US): down at once, up only after a calm spell.
void Judge(uint64_t budget, uint64_t max_ns, bool contended) {
  const uint64_t now = NowNs();
  if (contended) {
    contended_at_ns.store(now, std::memory_order_relaxed);
  } else if (now - contended_at_ns.load(std::memory_order_relaxed) < kCalmNs) {
    return;
  }
  const uint64_t next = SpinGovernor::NextBudgetNs(budget, max_ns, contended);
  if (next != budget) SetBudget(next);
}

// One spin's report, whichever way it ended.
void Report(const Config& config, uint64_t spun_ns) {
  if (!config.spin_adapt || config.spin_us == 0) return;
  const uint64_t max_ns = uint64_t{config.spin_us} * 1000;
  const uint64_t budget = Budget(max_ns);
  if (budget == 0) {
    // A wait that sleeps at once learns nothing: spin again, a little, only once in a while.
    if (NowNs() - none_since_ns.load(std::memory_order_relaxed) >= kProbeAfterNs) {
      SetBudget(SpinGovernor::NextBudgetNs(0, max_ns, false));
    }
    return;
  }
  Judge(budget, max_ns, SpinGovernor::Overran(spun_ns, budget));
}

}  // namespace

uint64_t SpinGovernor::BudgetNs(const Config& config) {
  const uint64_t max_ns = uint64_t{config.spin_us} * 1000;
  return config.spin_adapt ? Budget(max_ns) : max_ns;
}

void SpinGovernor::SpinFailed(const Config& config, uint64_t spun_ns) { Report(config, spun_ns); }

void SpinGovernor::SpinSucceeded(const Config& config, uint64_t spun_ns) {
  Report(config, spun_ns);
}

bool SpinGovernor::Overran(uint64_t spun_ns, uint64_t budget_ns) {
  return spun_ns > 2 * budget_ns && spun_ns - budget_ns > kOverrunNs;
}

uint64_t SpinGovernor::NextBudgetNs(uint64_t budget_ns, uint64_t max_ns, bool contended) {
  if (contended) return budget_ns / 2 < kFloorNs ? 0 : budget_ns / 2;
  return std::min(max_ns, budget_ns + std::max<uint64_t>(max_ns / kSteps, 1));
}

}  // namespace san
