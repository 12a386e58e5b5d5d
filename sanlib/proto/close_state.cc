#include "sanlib/proto/close_state.h"

namespace san::proto {

const char* ClosePhaseName(ClosePhase phase) {
  switch (phase) {
    case ClosePhase::kOpen:
      return "OPEN";
    case ClosePhase::kFinWait1:
      return "FIN_WAIT_1";
    case ClosePhase::kFinWait2:
      return "FIN_WAIT_2";
    case ClosePhase::kCloseWait:
      return "CLOSE_WAIT";
    case ClosePhase::kClosing:
      return "CLOSING";
    case ClosePhase::kLastAck:
      return "LAST_ACK";
    case ClosePhase::kClosed:
      return "CLOSED";
  }
  return "?";
}

ClosePhase CloseState::phase() const {
  if (finished()) return ClosePhase::kClosed;
  if (!fin_sent_) return peer_fin_ ? ClosePhase::kCloseWait : ClosePhase::kOpen;
  if (!peer_fin_) return fin_acked_ ? ClosePhase::kFinWait2 : ClosePhase::kFinWait1;
  // Both FINs exchanged: waiting for their FINACK (or to send ours).
  return fin_acked_ ? ClosePhase::kClosing : ClosePhase::kLastAck;
}

}  // namespace san::proto
