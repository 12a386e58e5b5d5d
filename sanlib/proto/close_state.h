// The connection's closing handshake (SOVIA Figure 8, TCP-like), as pure state.
//
// Four facts define every phase: we sent FIN (shutdown-write or close), the peer acknowledged it
// (FINACK), the peer's FIN arrived, and we acknowledged it. The phase is derived from them, so
// there is no transition table to get out of step:
//
//   OPEN --close: send FIN--> FIN_WAIT_1 --FINACK--> FIN_WAIT_2 --FIN: send FINACK--> CLOSED
//   OPEN --FIN: send FINACK--> CLOSE_WAIT --close: send FIN--> LAST_ACK --FINACK--> CLOSED
//   FIN_WAIT_1 --FIN: send FINACK--> LAST_ACK (FINs crossed: TCP calls this CLOSING)
//   ("close" is shutdown-write or close: either sends the one FIN.)
//
// A FINACK needs a credit, so "send FINACK" may wait: CLOSE_WAIT and LAST_ACK cover that wait
// (FINACK owed or sent, same phase), and once our FIN is acknowledged and only our FINACK is
// missing the phase is CLOSING. Without history the phases name what is awaited: LAST_ACK = both
// FINs are known and ours is unacknowledged; CLOSING = ours is acknowledged, our FINACK is not
// sent.
//
// Plain data; not thread-safe (the stream's lock guards it). Duplicate or unexpected FIN/FINACK
// from the peer is a protocol error (EPROTO).
#pragma once

#include "sanlib/common/status.h"

namespace san::proto {

enum class ClosePhase { kOpen, kFinWait1, kFinWait2, kCloseWait, kClosing, kLastAck, kClosed };
const char* ClosePhaseName(ClosePhase phase);

class CloseState {
 public:
  // The application will send no more; true if a FIN must now be sent (first call only).
  bool ShutdownWrite() {
    if (fin_sent_) return false;
    fin_sent_ = true;
    return true;
  }
  // The peer's FIN arrived: a FINACK is now owed (sent when a credit is available).
  Status PeerFin() {
    if (peer_fin_) return Status(EPROTO, "duplicate FIN");
    peer_fin_ = true;
    finack_owed_ = true;
    return Status::Ok();
  }
  Status PeerFinAck() {
    if (!fin_sent_ || fin_acked_) return Status(EPROTO, "unexpected FINACK");
    fin_acked_ = true;
    return Status::Ok();
  }
  bool finack_owed() const { return finack_owed_; }
  void FinAckSent() { finack_owed_ = false; }

  bool fin_sent() const { return fin_sent_; }
  bool fin_acked() const { return fin_acked_; }
  bool peer_fin() const { return peer_fin_; }  // no more data will arrive: EOF after the queue
  bool finished() const { return fin_sent_ && fin_acked_ && peer_fin_ && !finack_owed_; }
  ClosePhase phase() const;

 private:
  bool fin_sent_ = false;
  bool fin_acked_ = false;
  bool peer_fin_ = false;
  bool finack_owed_ = false;
};

}  // namespace san::proto
