#include "ftp_client/owed_replies.h"

namespace san::ftp {

OwedReplies::Fed OwedReplies::Feed(std::string_view line) {
  switch (assembler_.Feed(line)) {
    case ReplyAssembler::Result::kNeedMore:
      return Fed::kNeedMore;
    case ReplyAssembler::Result::kBad:
      return Fed::kBad;
    case ReplyAssembler::Result::kDone:
      break;
  }
  // A 1xx only says that the final reply is on its way: the command still owes it.
  if (!assembler_.reply().positive_preliminary() && owed_ > 0) --owed_;
  return Fed::kReply;
}

}  // namespace san::ftp
