// Small-message combining (proto/combiner.h): one test per rule of the header comment, plus the
// boundaries between them.
#include "sanlib/proto/combiner.h"

#include <gtest/gtest.h>

namespace san::proto {
namespace {

CombinePolicy Policy(bool enabled = true) {
  CombinePolicy p;
  p.enabled = enabled;
  p.copy_threshold = 2048;
  p.mtu = 8192;
  return p;
}

void ExpectPlan(const SendPlan& got, bool flush_before, bool append, bool flush_after,
                const char* what) {
  EXPECT_EQ(got.flush_before, flush_before) << what;
  EXPECT_EQ(got.append, append) << what;
  EXPECT_EQ(got.flush_after, flush_after) << what;
}

// Rule: a small request (<= copy_threshold) is appended to the combine buffer and waits while
// something of ours is unacknowledged.
TEST(proto_combiner, SmallRequestIsAppendedAndWaits) {
  ExpectPlan(PlanSend(Policy(), 0, 1, false), false, true, false, "empty buffer");
  ExpectPlan(PlanSend(Policy(), 100, 100, false), false, true, false, "behind buffered bytes");
  ExpectPlan(PlanSend(Policy(), 0, 2048, false), false, true, false, "exactly copy_threshold");
}

// Rule: ... flushed first if it would not fit (buffer + request > MTU).
TEST(proto_combiner, BufferIsFlushedFirstWhenTheRequestWouldNotFit) {
  ExpectPlan(PlanSend(Policy(), 8000, 193, false), true, true, false, "one byte over");
  ExpectPlan(PlanSend(Policy(), 8191, 2048, false), true, true, false, "nearly full buffer");
  ExpectPlan(PlanSend(Policy(), 8000, 192, false), false, true, true,
             "fits exactly: full, so send");
}

// Rule: the buffer goes as soon as it is full (the request made it exactly MTU).
TEST(proto_combiner, FullBufferIsSentRightAfterAppending) {
  ExpectPlan(PlanSend(Policy(), 6144, 2048, false), false, true, true, "fills to MTU");
  // After a flush_before the request starts a new buffer; alone it is full only at MTU.
  CombinePolicy p = Policy();
  p.mtu = 2048;
  ExpectPlan(PlanSend(p, 100, 2048, false), true, true, true, "flush, then a full new buffer");
  ExpectPlan(PlanSend(p, 0, 2048, false), false, true, true, "fills an empty buffer");
}

// Rule: sent at once if combining is off (TCP_NODELAY) -- directly when nothing is buffered.
TEST(proto_combiner, NoDelaySendsAtOnce) {
  ExpectPlan(PlanSend(Policy(false), 0, 1, false), false, false, false, "direct, nothing buffered");
  ExpectPlan(PlanSend(Policy(false), 0, 100000, false), false, false, false, "large, direct");
  // Something already buffered (combining was on a moment ago): append behind it and send both in
  // one packet, keeping order, instead of two packets.
  ExpectPlan(PlanSend(Policy(false), 10, 20, false), false, true, true, "behind buffered bytes");
  ExpectPlan(PlanSend(Policy(false), 8000, 1000, false), true, true, true, "does not fit");
}

// Rule: sent at once if the window is idle (Nagle: nothing of ours outstanding).
TEST(proto_combiner, IdleWindowSendsAtOnce) {
  ExpectPlan(PlanSend(Policy(), 0, 1, true), false, false, false, "direct, no staging copy");
  ExpectPlan(PlanSend(Policy(), 0, 2048, true), false, false, false, "threshold size, direct");
  ExpectPlan(PlanSend(Policy(), 50, 50, true), false, true, true, "appended and sent together");
  ExpectPlan(PlanSend(Policy(), 8100, 100, true), true, true, true, "flush, then the rest");
}

// Rule: a larger request flushes the buffer and is sent directly.
TEST(proto_combiner, LargeRequestFlushesAndGoesDirect) {
  ExpectPlan(PlanSend(Policy(), 0, 2049, false), false, false, false, "nothing to flush");
  ExpectPlan(PlanSend(Policy(), 10, 2049, false), true, false, false, "flush first");
  ExpectPlan(PlanSend(Policy(), 10, 1 << 20, true), true, false, false, "idle window too");
  ExpectPlan(PlanSend(Policy(false), 10, 4096, false), true, false, false, "nodelay too");
}

// A threshold above the MTU cannot make a request larger than a packet "small".
TEST(proto_combiner, RequestLargerThanMtuIsNeverCombined) {
  CombinePolicy p = Policy();
  p.copy_threshold = 1 << 20;
  p.mtu = 1024;
  ExpectPlan(PlanSend(p, 0, 1024, false), false, true, true, "exactly MTU");
  ExpectPlan(PlanSend(p, 0, 1025, false), false, false, false, "MTU + 1");
  ExpectPlan(PlanSend(p, 512, 1025, false), true, false, false, "MTU + 1, buffered");
}

// Invariants over a grid: an appended request always fits the buffer after the optional flush; a
// flush never happens with nothing buffered; flush_after only with append.
TEST(proto_combiner, PlanInvariants) {
  for (bool enabled : {true, false}) {
    for (uint32_t mtu : {64u, 1000u, 8192u}) {
      CombinePolicy p = Policy(enabled);
      p.mtu = mtu;
      p.copy_threshold = 512;
      for (size_t buffered = 0; buffered <= mtu; buffered += 37) {
        for (size_t request = 1; request <= 2 * size_t{mtu}; request += 29) {
          for (bool idle : {true, false}) {
            SendPlan s = PlanSend(p, buffered, request, idle);
            ASSERT_FALSE(s.flush_before && buffered == 0);
            ASSERT_FALSE(s.flush_after && !s.append);
            if (s.append) {
              ASSERT_LE((s.flush_before ? 0 : buffered) + request, size_t{mtu});
              ASSERT_LE(request, size_t{p.copy_threshold});
            } else {
              ASSERT_EQ(s.flush_before, buffered > 0);  // direct sends keep byte order
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace san::proto
