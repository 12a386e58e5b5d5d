#include "sanlib/proto/flow_control.h"

namespace san::proto {

Status SendWindow::Open(uint32_t window, uint32_t already_used) {
  if (opened_) return Status(EPROTO, "second wakeup");
  if (window == 0 || already_used > window) return Status(EPROTO, "wakeup window check");
  window_ = window;
  // Our WAKEUP (if sent) was accounted against the provisional single credit.
  credits_ = window - already_used;
  wakeup_unreturned_ = already_used > 0;
  opened_ = true;
  return Status::Ok();
}

Status SendWindow::Grant(uint32_t credits) {
  if (credits == 0) return Status::Ok();
  if (credits_ + credits > window_) return Status(EPROTO, "peer granted credits beyond window");
  credits_ += credits;
  wakeup_unreturned_ = false;  // the peer's first report includes our WAKEUP's buffer
  return Status::Ok();
}

uint32_t EffectiveAckThreshold(uint32_t own_threshold, uint32_t granted_window,
                               uint32_t peer_ack_reserve) {
  uint32_t ack_slots = peer_ack_reserve > 1 ? peer_ack_reserve - 1 : 1;
  // Smallest t with ceil(granted_window / t) <= ack_slots.
  uint32_t needed = (granted_window + ack_slots - 1) / ack_slots;
  uint32_t t = own_threshold > needed ? own_threshold : needed;
  return t == 0 ? 1 : t;
}

}  // namespace san::proto
