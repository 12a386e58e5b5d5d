// FaultPlan: the faults a loopback endpoint injects into its own sends, so protocol tests can make
// loss, delay, post failures and broken connections happen exactly where they want them.
//
// Sends are numbered per endpoint from 1, counting every PostSend that passes the ordinary checks
// (connected, segment count, EMSGSIZE, send-queue EAGAIN). 0 disables a fault.
// Thread-safety: a plain value; copied into each endpoint when it is created.
#pragma once

#include <cerrno>
#include <cstdint>

namespace san::fabric::loopback {

struct FaultPlan {
  // The Nth send completes successfully on the sender but its message is lost: it consumes no
  // receive and the receiver never sees it. A plan with drops makes the provider not kCapReliable.
  uint64_t drop_send = 0;
  // The Nth PostSend fails with `fail_error`; nothing is sent and no completion is produced.
  uint64_t fail_send = 0;
  int fail_error = EIO;
  // The Nth PostSend breaks the connection instead of sending: it returns ECONNRESET, and both
  // sides' outstanding receives complete with ECONNRESET.
  uint64_t break_at_send = 0;
  // Every message is held back: the receiver's first `delay_polls` Polls after the send do not
  // see it, and none before `delay_us` microseconds have passed. Order is kept (a message never
  // overtakes a held one). While anything is held, Arm() returns false (the receiver must poll).
  uint32_t delay_polls = 0;
  uint32_t delay_us = 0;

  bool lossy() const { return drop_send != 0; }
  bool delays() const { return delay_polls != 0 || delay_us != 0; }
};

}  // namespace san::fabric::loopback
