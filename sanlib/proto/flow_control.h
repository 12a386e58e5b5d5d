// Window flow control and delayed acknowledgements (SOVIA 3.2.1-3.2.2), as pure state.
//
// SendWindow: credits this side holds towards the peer. A credit is one receive buffer the peer has
// posted for us; DATA, WAKEUP and FINACK each consume one. Credits come back piggybacked on any
// packet (Header::credits). Granting more than the window is a protocol violation (EPROTO).
//
// DelayedAck: receive buffers this side has freed but not yet reported. Reported on the next packet
// we send anyway (piggyback), or by an explicit ACK once `threshold` are pending.
//
// ReceiveAccount: the receiver's check on the sender: credit-consuming packets in our buffers never
// exceed the window we granted.
//
// All three are plain data (no pointers) so they can live in a shared mapping. Not thread-safe: the
// stream's lock guards them.
#pragma once

#include <cstdint>

#include "sanlib/common/status.h"

namespace san::proto {

class SendWindow {
 public:
  // Before the peer's WAKEUP we may send exactly our own WAKEUP.
  SendWindow() = default;
  // The peer's WAKEUP granted `window` credits, one of which our WAKEUP already used (if sent).
  Status Open(uint32_t window, uint32_t already_used);
  bool has_credit() const { return credits_ > 0; }
  // Nothing of our *data* unacknowledged (Nagle's test). Our WAKEUP's credit does not count: it is
  // the first buffer the peer frees, so its first non-zero grant always returns it, and until then
  // a fresh connection would otherwise never be idle and its first small send would wait.
  bool idle() const { return opened_ && credits_ + (wakeup_unreturned_ ? 1 : 0) == window_; }
  void Consume() { --credits_; }
  Status Grant(uint32_t credits);
  uint32_t credits() const { return credits_; }
  uint32_t window() const { return window_; }
  bool opened() const { return opened_; }

 private:
  uint32_t credits_ = 1;
  uint32_t window_ = 1;
  bool opened_ = false;
  bool wakeup_unreturned_ = false;
};

class DelayedAck {
 public:
  void set_threshold(uint32_t t) { threshold_ = t; }
  uint32_t threshold() const { return threshold_; }
  void Freed() { ++pending_; }
  uint32_t pending() const { return pending_; }
  bool explicit_ack_due() const { return pending_ >= threshold_; }
  // Credits to put in the next packet's header (at most 255); removes them from pending.
  uint8_t Take() {
    uint32_t n = pending_ > 255 ? 255 : pending_;
    pending_ -= n;
    return static_cast<uint8_t>(n);
  }

 private:
  uint32_t pending_ = 0;
  uint32_t threshold_ = 16;
};

class ReceiveAccount {
 public:
  void set_window(uint32_t window) { window_ = window; }
  // A credit-consuming packet arrived. EPROTO if the sender exceeded the window we granted.
  Status Arrived() {
    if (++in_use_ > window_) return Status(EPROTO, "window overrun by peer");
    return Status::Ok();
  }
  void Released() { --in_use_; }
  uint32_t in_use() const { return in_use_; }

 private:
  uint32_t in_use_ = 0;
  uint32_t window_ = 0;
};

// The threshold a sender must use so its explicit ACKs never outnumber the receives the peer
// reserved for them: ACKs in flight <= granted_window / t, which must stay below ack_reserve (one
// of the reserve is the FIN's). SOVIA's P = w + w/t + 1 is the case where both ends use the same t.
uint32_t EffectiveAckThreshold(uint32_t own_threshold, uint32_t granted_window,
                               uint32_t peer_ack_reserve);

}  // namespace san::proto
