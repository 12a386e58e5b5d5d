#include "sanlib/proto/combiner.h"

namespace san::proto {

SendPlan PlanSend(const CombinePolicy& policy, size_t buffered, size_t request, bool window_idle) {
  SendPlan plan;
  const bool small = request <= policy.copy_threshold && request <= policy.mtu;
  const bool send_now = !policy.enabled || window_idle;
  if (!small || (send_now && buffered == 0)) {
    plan.flush_before = buffered > 0;
    return plan;  // direct send
  }
  plan.append = true;
  plan.flush_before = buffered + request > policy.mtu;
  const size_t after = (plan.flush_before ? 0 : buffered) + request;
  plan.flush_after = send_now || after == policy.mtu;
  return plan;
}

}  // namespace san::proto
