// The FIN/FINACK handshake (proto/close_state.h): every phase, every transition, and the peer
// inputs that are protocol errors.
#include "sanlib/proto/close_state.h"

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

namespace san::proto {
namespace {

TEST(proto_close_state, StartsOpen) {
  CloseState s;
  EXPECT_EQ(s.phase(), ClosePhase::kOpen);
  EXPECT_FALSE(s.fin_sent());
  EXPECT_FALSE(s.fin_acked());
  EXPECT_FALSE(s.peer_fin());
  EXPECT_FALSE(s.finack_owed());
  EXPECT_FALSE(s.finished());
}

// OPEN -> FIN_WAIT_1 -> FIN_WAIT_2 -> CLOSED (we close first; the peer closes after our FINACK).
TEST(proto_close_state, ActiveClose) {
  CloseState s;
  EXPECT_TRUE(s.ShutdownWrite());
  EXPECT_EQ(s.phase(), ClosePhase::kFinWait1);
  EXPECT_FALSE(s.ShutdownWrite());  // idempotent: one FIN only
  ASSERT_TRUE(s.PeerFinAck().ok());
  EXPECT_EQ(s.phase(), ClosePhase::kFinWait2);
  EXPECT_FALSE(s.finished());
  ASSERT_TRUE(s.PeerFin().ok());
  EXPECT_TRUE(s.finack_owed());
  EXPECT_FALSE(s.finished());                  // not before the FINACK is on its way
  EXPECT_EQ(s.phase(), ClosePhase::kClosing);  // only our FINACK (waiting for a credit) is missing
  s.FinAckSent();
  EXPECT_FALSE(s.finack_owed());
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(s.phase(), ClosePhase::kClosed);
}

// OPEN -> CLOSE_WAIT -> LAST_ACK -> CLOSED (the peer closes first).
TEST(proto_close_state, PassiveClose) {
  CloseState s;
  ASSERT_TRUE(s.PeerFin().ok());
  EXPECT_TRUE(s.peer_fin());
  EXPECT_TRUE(s.finack_owed());
  EXPECT_EQ(s.phase(), ClosePhase::kCloseWait);
  s.FinAckSent();
  EXPECT_EQ(s.phase(), ClosePhase::kCloseWait);  // still ours to close
  EXPECT_TRUE(s.ShutdownWrite());
  EXPECT_EQ(s.phase(), ClosePhase::kLastAck);
  ASSERT_TRUE(s.PeerFinAck().ok());
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(s.phase(), ClosePhase::kClosed);
}

// FIN_WAIT_1 -> CLOSING -> CLOSED (simultaneous close: FINs cross).
TEST(proto_close_state, SimultaneousClose) {
  CloseState s;
  EXPECT_TRUE(s.ShutdownWrite());
  ASSERT_TRUE(s.PeerFin().ok());
  s.FinAckSent();
  // Both FINs are out and ours is not yet acknowledged: LAST_ACK (TCP's CLOSING; without history
  // the phase cannot tell who closed first, see close_state.h).
  EXPECT_EQ(s.phase(), ClosePhase::kLastAck);
  EXPECT_FALSE(s.finished());
  ASSERT_TRUE(s.PeerFinAck().ok());
  EXPECT_EQ(s.phase(), ClosePhase::kClosed);
}

TEST(proto_close_state, FinAckedBeforeOursIsSentIsClosing) {
  CloseState s;
  EXPECT_TRUE(s.ShutdownWrite());
  ASSERT_TRUE(s.PeerFin().ok());
  ASSERT_TRUE(s.PeerFinAck().ok());
  EXPECT_TRUE(s.finack_owed());
  EXPECT_EQ(s.phase(), ClosePhase::kClosing);  // only our FINACK is missing
  s.FinAckSent();
  EXPECT_EQ(s.phase(), ClosePhase::kClosed);
}

TEST(proto_close_state, DuplicateFinIsEproto) {
  CloseState s;
  ASSERT_TRUE(s.PeerFin().ok());
  EXPECT_EQ(s.PeerFin().code(), EPROTO);
  s.FinAckSent();
  EXPECT_EQ(s.PeerFin().code(), EPROTO);
  EXPECT_FALSE(s.finack_owed());  // a rejected FIN owes nothing
}

TEST(proto_close_state, UnexpectedFinAckIsEproto) {
  CloseState s;
  EXPECT_EQ(s.PeerFinAck().code(), EPROTO);  // we sent no FIN
  EXPECT_FALSE(s.fin_acked());
  ASSERT_TRUE(s.PeerFin().ok());
  EXPECT_EQ(s.PeerFinAck().code(), EPROTO);  // still none
  EXPECT_TRUE(s.ShutdownWrite());
  ASSERT_TRUE(s.PeerFinAck().ok());
  EXPECT_EQ(s.PeerFinAck().code(), EPROTO);  // a second one
}

TEST(proto_close_state, PhaseNames) {
  const std::pair<ClosePhase, std::string> names[] = {
      {ClosePhase::kOpen, "OPEN"},           {ClosePhase::kFinWait1, "FIN_WAIT_1"},
      {ClosePhase::kFinWait2, "FIN_WAIT_2"}, {ClosePhase::kCloseWait, "CLOSE_WAIT"},
      {ClosePhase::kClosing, "CLOSING"},     {ClosePhase::kLastAck, "LAST_ACK"},
      {ClosePhase::kClosed, "CLOSED"}};
  for (const auto& [phase, name] : names) EXPECT_EQ(ClosePhaseName(phase), name);
  EXPECT_STREQ(ClosePhaseName(static_cast<ClosePhase>(99)), "?");
}

// Exhaustive: every order of the four events reaches CLOSED exactly when all four happened, and
// the phase is always the one the header's diagram gives for that set of facts.
TEST(proto_close_state, EveryEventOrder) {
  enum Event { kShutdown, kPeerFin, kFinAckSent, kPeerFinAck };
  int orders = 0;
  Event ev[] = {kShutdown, kPeerFin, kFinAckSent, kPeerFinAck};
  std::sort(ev, ev + 4);
  do {
    CloseState s;
    bool shut = false, fin = false, sent = false, acked = false, valid = true;
    for (Event e : ev) {
      switch (e) {
        case kShutdown:
          EXPECT_TRUE(s.ShutdownWrite());
          shut = true;
          break;
        case kPeerFin:
          ASSERT_TRUE(s.PeerFin().ok());
          fin = true;
          break;
        case kFinAckSent:
          if (!fin) valid = false;  // cannot owe a FINACK before the FIN
          s.FinAckSent();
          sent = true;
          break;
        case kPeerFinAck:
          if (!shut) {
            EXPECT_EQ(s.PeerFinAck().code(), EPROTO);
            valid = false;
          } else {
            ASSERT_TRUE(s.PeerFinAck().ok());
            acked = true;
          }
          break;
      }
      if (!valid) break;
      ClosePhase want;
      if (shut && acked && fin && sent) {
        want = ClosePhase::kClosed;
      } else if (!shut) {
        want = fin ? ClosePhase::kCloseWait : ClosePhase::kOpen;
      } else if (!fin) {
        want = acked ? ClosePhase::kFinWait2 : ClosePhase::kFinWait1;
      } else {
        want = acked ? ClosePhase::kClosing : ClosePhase::kLastAck;
      }
      EXPECT_EQ(s.phase(), want) << ClosePhaseName(s.phase()) << " vs " << ClosePhaseName(want);
    }
    if (valid) {
      ++orders;
      EXPECT_TRUE(s.finished());
    }
  } while (std::next_permutation(ev, ev + 4));
  EXPECT_EQ(orders,
            6);  // of 24 orders, those with FIN before FINACK-sent and FIN before PeerFinAck
}

}  // namespace
}  // namespace san::proto
