// OwedReplies (ftp_client/owed_replies.h): the count of final replies a server still owes, kept
// across replies abandoned halfway (multi-line, after a 1xx), as FtpClient uses it to stay in
// step after a Ctrl-C.
#include "ftp_client/owed_replies.h"

#include <gtest/gtest.h>

#include <vector>

namespace san::ftp {
namespace {

using Fed = OwedReplies::Fed;

// One line fed, what Feed says, and what is owed after it.
struct Step {
  const char* line;
  Fed fed;
  int owed;
};

// `sent` commands, then the steps in order; returns the ledger for further checks.
OwedReplies FeedAll(int sent, const std::vector<Step>& steps) {
  OwedReplies owed;
  for (int i = 0; i < sent; ++i) owed.CommandSent();
  EXPECT_EQ(owed.owed(), sent);
  for (const Step& s : steps) {
    EXPECT_EQ(owed.Feed(s.line), s.fed) << s.line;
    EXPECT_EQ(owed.owed(), s.owed) << s.line;
  }
  return owed;
}

TEST(FtpOwedReplies, OneFinalReplySettlesOneCommand) {
  // A refusal is a final reply too.
  const OwedReplies owed =
      FeedAll(2, {{"250 CWD done.", Fed::kReply, 1}, {"550 No such file.", Fed::kReply, 0}});
  EXPECT_EQ(owed.reply().code, 550);
}

TEST(FtpOwedReplies, PreliminaryRepliesSettleNothing) {
  const OwedReplies owed = FeedAll(1, {{"150 Opening data connection.", Fed::kReply, 1},
                                       {"125 Still going.", Fed::kReply, 1},
                                       {"226 Transfer complete.", Fed::kReply, 0}});
  EXPECT_EQ(owed.reply().code, 226);
}

TEST(FtpOwedReplies, MultiLineReplyCountsOnceAcrossCalls) {
  // Inside the reply, a line with another code (or the same code and a '-') is text.
  OwedReplies owed = FeedAll(2, {{"211-Features:", Fed::kNeedMore, 2},
                                 {"226 not the end", Fed::kNeedMore, 2},
                                 {"211-not the end either", Fed::kNeedMore, 2},
                                 {" SIZE", Fed::kNeedMore, 2},
                                 {"211 End", Fed::kReply, 1}});
  EXPECT_EQ(owed.reply().text, "Features:\n226 not the end\n211-not the end either\n SIZE\nEnd");
  EXPECT_EQ(owed.Feed("257 \"/\""), Fed::kReply);
  EXPECT_EQ(owed.owed(), 0);
}

TEST(FtpOwedReplies, AbortedTransferOwesTwoFinalReplies) {
  // RETR interrupted before its 150, then ABOR: 150, 426 (RETR's), 226 (ABOR's).
  FeedAll(2, {{"150 Opening.", Fed::kReply, 2},
              {"426 Transfer aborted.", Fed::kReply, 1},
              {"226 ABOR successful.", Fed::kReply, 0}});
}

TEST(FtpOwedReplies, UnsolicitedReplyAndBadLines) {
  FeedAll(0, {{"421 Timeout.", Fed::kReply, 0}});  // nothing owed: still a reply
  OwedReplies owed = FeedAll(1, {{"hello", Fed::kBad, 1},
                                 {"600 no such class", Fed::kBad, 1},
                                 {"25", Fed::kBad, 1},
                                 {"200-half", Fed::kNeedMore, 1}});
  owed.Reset();  // the connection went away halfway through a reply
  EXPECT_EQ(owed.owed(), 0);
  owed.CommandSent();
  EXPECT_EQ(owed.Feed("220 fresh"), Fed::kReply);  // not text of the old reply
  EXPECT_EQ(owed.reply().text, "fresh");
  EXPECT_EQ(owed.owed(), 0);
}

}  // namespace
}  // namespace san::ftp
