#include "common/spin_governor.h"

#include <sys/resource.h>

#include <algorithm>

#include "common/clock.h"

namespace san {
namespace {

// Down fast, up slowly: contention halves the budget (below kFloorNs it is none); a look that
// finds the CPU was ours adds 1/kSteps of SAN_SPIN_US. At none, a wait sleeps at once and so
// learns nothing (a woken thread preempts a CPU hog and leaves voluntarily): the spin is tried
// again, at 1/kSteps, only after kProbeAfterNs -- a probe can cost a hog's time slice (the spin's
// sched_yield hands it the CPU), so it must be rare.
constexpr uint64_t kFloorNs = 1000;
constexpr uint64_t kSteps = 8;
constexpr uint64_t kProbeAfterNs = 50'000'000;

struct GovernorState {
  bool started = false;
  uint64_t budget_ns = 0;
  long last_nivcsw = 0;
  uint64_t none_since_ns = 0;  // when the budget dropped to none
};

long InvoluntarySwitches() {
  rusage ru{};
  return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nivcsw : -1;
}

GovernorState& State(uint32_t configured_us) {
  thread_local GovernorState state;
  if (!state.started) {
    state.started = true;
    state.budget_ns = uint64_t{configured_us} * 1000;
    state.last_nivcsw = InvoluntarySwitches();
  }
  return state;
}

}  // namespace

uint64_t SpinGovernor::BudgetNs(const Config& config) {
  const uint64_t max_ns = uint64_t{config.spin_us} * 1000;
  if (!config.spin_adapt) return max_ns;
  return std::min(State(config.spin_us).budget_ns, max_ns);
}

void SpinGovernor::SpinFailed(const Config& config) {
  if (!config.spin_adapt || config.spin_us == 0) return;
  GovernorState& s = State(config.spin_us);
  const uint64_t max_ns = uint64_t{config.spin_us} * 1000;
  if (s.budget_ns == 0) {
    if (NowNs() - s.none_since_ns < kProbeAfterNs) return;
    s.last_nivcsw = InvoluntarySwitches();  // the probe's baseline
    s.budget_ns = NextBudgetNs(0, max_ns, false);
    return;
  }
  const long now = InvoluntarySwitches();
  if (now < 0) return;
  const bool contended = now != s.last_nivcsw;
  s.last_nivcsw = now;
  s.budget_ns = NextBudgetNs(s.budget_ns, max_ns, contended);
  if (s.budget_ns == 0) s.none_since_ns = NowNs();
}

void SpinGovernor::SpinSucceeded(const Config& config, uint64_t spun_ns) {
  if (!config.spin_adapt) return;
  GovernorState& s = State(config.spin_us);
  // Within the budget: the spin did its job. Well past it: the spin's sched_yield gave the CPU
  // away (to the peer, or to a CPU hog for a whole time slice) -- contention.
  if (s.budget_ns == 0 || spun_ns <= 2 * s.budget_ns) return;
  s.last_nivcsw = InvoluntarySwitches();
  s.budget_ns = NextBudgetNs(s.budget_ns, uint64_t{config.spin_us} * 1000, true);
  if (s.budget_ns == 0) s.none_since_ns = NowNs();
}

uint64_t SpinGovernor::NextBudgetNs(uint64_t budget_ns, uint64_t max_ns, bool contended) {
  if (contended) return budget_ns / 2 < kFloorNs ? 0 : budget_ns / 2;
  return std::min(max_ns, budget_ns + std::max<uint64_t>(max_ns / kSteps, 1));
}

}  // namespace san
