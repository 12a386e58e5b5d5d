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

  // Single copy (the endpoint emulates kCapSingleCopy with a memcpy "across processes"):
  //  no_single_copy      the provider does not advertise kCapSingleCopy at all;
  //  refuse_window_probe CanWriteWindows() is false from the start (a kernel that refuses
  //                      process_vm_writev at set-up);
  //  refuse_window_write the Nth WriteWindow fails with EPERM after claiming the window (a refusal
  //                      discovered mid-connection); CanWriteWindows() is false afterwards;
  //  window_write_hold_us every WriteWindow holds the claimed window this long before copying, so
  //                      a receiver revoking meanwhile must wait (the cancel race).
  // Server side: Accept() takes this long before it answers (a handshake that waits a round trip,
  // as verbs' Accept waits for the client's RTU), so callers that must not be held up by it can be
  // tested in one process.
  uint32_t accept_delay_us = 0;
  // Server side: the handshake is not finished until the test calls
  // LoopbackProvider::ReleaseAccepts() (Accept() waits for it, bounded; FinishAccept() says "not
  // yet"), so a caller serving several handshakes at once can be seen doing so.
  bool hold_accepts = false;

  bool no_single_copy = false;
  // Sends from registered application memory (kCapRegisteredSend, emulated: the copy into the
  // peer's receive is made in PostSend as for any send; registration checks that the memory is
  // mapped and counts what is sent from it):
  //  no_registered_send  the provider does not advertise kCapRegisteredSend;
  //  refuse_register     the Nth RegisterSendMemory fails with ENOMEM (a pinned-memory limit).
  bool no_registered_send = false;
  uint64_t refuse_register = 0;
  bool refuse_window_probe = false;
  uint64_t refuse_window_write = 0;
  uint32_t window_write_hold_us = 0;

  bool lossy() const { return drop_send != 0; }
  bool delays() const { return delay_polls != 0 || delay_us != 0; }
};

}  // namespace san::fabric::loopback
