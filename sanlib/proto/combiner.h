// Small-message combining (SOVIA 3.2.3, Nagle-like) as a pure decision: given what is buffered and
// what the application asks to send, what the stream should do. The stream carries it out.
//
// Rules (SOVIA's four flush points plus Nagle's "send at once when nothing is outstanding"):
//   - a request of at most copy_threshold bytes is appended to the combine buffer, which is flushed
//     first if the request would not fit (buffer + request > MTU);
//   - it is sent at once if combining is off (TCP_NODELAY) or the window is idle (nothing of ours
//     unacknowledged: the peer is waiting, delaying would only add latency) -- directly, without
//     the staging copy, when nothing is buffered;
//   - otherwise it waits for: the buffer filling, the timer, recv()/poll(), close(), or the window
//     becoming idle;
//   - a larger request flushes the buffer and is sent directly (no staging copy where the provider
//     can send from any memory).
// Thread-safety: pure function.
#pragma once

#include <cstddef>
#include <cstdint>

namespace san::proto {

struct CombinePolicy {
  bool enabled = true;            // false with TCP_NODELAY or SAN_COMBINE=off
  uint32_t copy_threshold = 2048;
  uint32_t mtu = 32768;
};

struct SendPlan {
  bool flush_before = false;  // post what is buffered first
  bool append = false;        // copy the request into the combine buffer (else send it directly)
  bool flush_after = false;   // post the combine buffer right after appending
};

SendPlan PlanSend(const CombinePolicy& policy, size_t buffered, size_t request, bool window_idle);

}  // namespace san::proto
