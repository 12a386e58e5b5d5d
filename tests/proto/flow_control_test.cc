// Window flow control and delayed ACKs (proto/flow_control.h) as pure state.
#include "sanlib/proto/flow_control.h"

#include <gtest/gtest.h>

namespace san::proto {
namespace {

// ---- SendWindow --------------------------------------------------------------------------------

TEST(proto_flow_control, WindowBeforeWakeupAllowsExactlyOurWakeup) {
  SendWindow w;
  EXPECT_FALSE(w.opened());
  EXPECT_FALSE(w.idle());  // never idle before the peer's WAKEUP
  EXPECT_TRUE(w.has_credit());
  EXPECT_EQ(w.credits(), 1u);
  w.Consume();  // our WAKEUP
  EXPECT_FALSE(w.has_credit());
}

TEST(proto_flow_control, OpenAccountsForOurWakeup) {
  SendWindow a;
  a.Consume();
  ASSERT_TRUE(a.Open(32, 1).ok());
  EXPECT_TRUE(a.opened());
  EXPECT_EQ(a.window(), 32u);
  EXPECT_EQ(a.credits(), 31u);
  // The WAKEUP is unacknowledged, but it is not data: a fresh connection is idle (Nagle sends its
  // first small message at once).
  EXPECT_TRUE(a.idle());
  a.Consume();  // one DATA packet
  EXPECT_FALSE(a.idle());
  ASSERT_TRUE(a.Grant(1).ok());  // the first grant returns the WAKEUP's buffer only
  EXPECT_FALSE(a.idle());        // the DATA packet is still out
  ASSERT_TRUE(a.Grant(1).ok());
  EXPECT_TRUE(a.idle());
  EXPECT_EQ(a.credits(), 32u);

  SendWindow b;  // the peer's WAKEUP came before we sent ours
  ASSERT_TRUE(b.Open(8, 0).ok());
  EXPECT_EQ(b.credits(), 8u);
  EXPECT_TRUE(b.idle());
}

TEST(proto_flow_control, OpenRejectsBadWindowsAndASecondWakeup) {
  SendWindow a;
  EXPECT_EQ(a.Open(0, 0).code(), EPROTO);
  EXPECT_FALSE(a.opened());
  SendWindow b;
  EXPECT_EQ(b.Open(1, 2).code(), EPROTO);  // we used more than it grants
  SendWindow c;
  ASSERT_TRUE(c.Open(4, 1).ok());
  EXPECT_EQ(c.Open(4, 1).code(), EPROTO);
  EXPECT_EQ(c.window(), 4u);
  EXPECT_EQ(c.credits(), 3u);
}

TEST(proto_flow_control, ConsumeAndGrantWithinTheWindow) {
  SendWindow w;
  ASSERT_TRUE(w.Open(4, 0).ok());
  for (int i = 0; i < 4; ++i) w.Consume();
  EXPECT_FALSE(w.has_credit());
  EXPECT_TRUE(w.Grant(0).ok());  // no-op
  EXPECT_EQ(w.credits(), 0u);
  EXPECT_TRUE(w.Grant(3).ok());
  EXPECT_EQ(w.credits(), 3u);
  EXPECT_TRUE(w.Grant(1).ok());
  EXPECT_EQ(w.credits(), 4u);
  EXPECT_TRUE(w.idle());
}

TEST(proto_flow_control, GrantBeyondWindowIsEproto) {
  SendWindow w;
  ASSERT_TRUE(w.Open(4, 0).ok());
  EXPECT_EQ(w.Grant(1).code(), EPROTO);  // nothing outstanding to give back
  w.Consume();
  w.Consume();
  EXPECT_EQ(w.Grant(3).code(), EPROTO);
  EXPECT_EQ(w.credits(), 2u);  // a rejected grant changes nothing
  EXPECT_EQ(w.Grant(255).code(), EPROTO);
  EXPECT_TRUE(w.Grant(2).ok());
  // Before the window opens its size is the provisional 1.
  SendWindow fresh;
  EXPECT_EQ(fresh.Grant(1).code(), EPROTO);
  fresh.Consume();
  EXPECT_TRUE(fresh.Grant(1).ok());
}

// ---- DelayedAck --------------------------------------------------------------------------------

TEST(proto_flow_control, DelayedAckDueAtThreshold) {
  DelayedAck a;
  EXPECT_EQ(a.threshold(), 16u);
  a.set_threshold(3);
  EXPECT_FALSE(a.explicit_ack_due());
  a.Freed();
  a.Freed();
  EXPECT_FALSE(a.explicit_ack_due());
  a.Freed();
  EXPECT_TRUE(a.explicit_ack_due());
  EXPECT_EQ(a.Take(), 3);
  EXPECT_EQ(a.pending(), 0u);
  EXPECT_FALSE(a.explicit_ack_due());
  EXPECT_EQ(a.Take(), 0);  // nothing to piggyback
}

TEST(proto_flow_control, DelayedAckTakeIsCappedAt255) {
  DelayedAck a;
  for (int i = 0; i < 300; ++i) a.Freed();
  EXPECT_EQ(a.Take(), 255);
  EXPECT_EQ(a.pending(), 45u);
  EXPECT_EQ(a.Take(), 45);
  EXPECT_EQ(a.pending(), 0u);
}

// ---- ReceiveAccount ----------------------------------------------------------------------------

TEST(proto_flow_control, ReceiveAccountCatchesWindowOverrun) {
  ReceiveAccount r;
  r.set_window(2);
  EXPECT_TRUE(r.Arrived().ok());
  EXPECT_TRUE(r.Arrived().ok());
  EXPECT_EQ(r.in_use(), 2u);
  EXPECT_EQ(r.Arrived().code(), EPROTO);
  ReceiveAccount s;
  s.set_window(2);
  EXPECT_TRUE(s.Arrived().ok());
  s.Released();
  EXPECT_TRUE(s.Arrived().ok());
  EXPECT_TRUE(s.Arrived().ok());
  EXPECT_EQ(s.in_use(), 2u);
  ReceiveAccount none;  // no window granted yet: anything credited is an overrun
  EXPECT_EQ(none.Arrived().code(), EPROTO);
}

// ---- EffectiveAckThreshold ---------------------------------------------------------------------

TEST(proto_flow_control, EffectiveAckThresholdSymmetricDefaultsKeepOwn) {
  // SOVIA's case: both ends w = 32, t = 16, so the peer reserved 32/16 + 1 = 3.
  EXPECT_EQ(EffectiveAckThreshold(16, 32, 3), 16u);
  EXPECT_EQ(EffectiveAckThreshold(4, 32, 32 / 4 + 1), 4u);
  EXPECT_EQ(EffectiveAckThreshold(1, 8, 9), 1u);
}

TEST(proto_flow_control, EffectiveAckThresholdRaisedForASmallPeerReserve) {
  // We granted 32 and want t = 2 (16 ACKs in flight) but the peer reserved only 2 for ACKs (+FIN).
  EXPECT_EQ(EffectiveAckThreshold(2, 32, 3), 16u);
  EXPECT_EQ(EffectiveAckThreshold(2, 33, 3), 17u);  // ceil(33 / 2)
  EXPECT_EQ(EffectiveAckThreshold(1, 255, 4), 85u);
}

TEST(proto_flow_control, EffectiveAckThresholdDegenerateReserves) {
  // A reserve of 0 or 1 leaves (at most) the FIN's slot; one ACK in flight at a time is assumed.
  EXPECT_EQ(EffectiveAckThreshold(2, 32, 1), 32u);
  EXPECT_EQ(EffectiveAckThreshold(2, 32, 0), 32u);
  EXPECT_EQ(EffectiveAckThreshold(0, 0, 0), 1u);   // never 0
  EXPECT_EQ(EffectiveAckThreshold(0, 10, 6), 2u);  // own 0 means "as often as allowed"
  EXPECT_EQ(EffectiveAckThreshold(50, 32, 100), 50u);
}

TEST(proto_flow_control, EffectiveAckThresholdNeverOverrunsTheReserve) {
  // Property: ACKs in flight (each carries >= t credits, all credits <= window) fit the reserve.
  for (uint32_t window = 1; window <= 255; ++window) {
    for (uint32_t reserve = 2; reserve <= 20; ++reserve) {
      for (uint32_t own : {1u, 2u, 7u, 16u}) {
        const uint32_t t = EffectiveAckThreshold(own, window, reserve);
        ASSERT_GE(t, own);
        ASSERT_LE(window / t, reserve - 1) << window << " " << reserve << " " << own;
        // And it is the smallest such t at or above `own`.
        if (t > own) {
          ASSERT_GT(window / (t - 1) + (window % (t - 1) != 0), reserve - 1);
        }
      }
    }
  }
}

}  // namespace
}  // namespace san::proto
