// OwedReplies: the replies an FTP server still owes on one control connection, so that a client
// that stopped waiting for one (Ctrl-C, a timeout) skips it later instead of taking it for the
// answer to its next command.
//
// RFC 959 gives every command exactly one final reply (2xx-5xx); some commands (RETR, STOR, LIST,
// a greeting's 120) send preliminary 1xx replies before it. The ledger counts the commands sent
// whose final reply has not been read, and assembles replies line by line across calls, so a wait
// abandoned in the middle of a multi-line reply goes on where it stopped. Pure logic, no I/O: the
// client feeds it the lines it reads (FtpClient::ReadReply).
// Invariants: owed() >= 0; a final reply when none is owed (an unsolicited 421) is still returned
// and leaves owed() at 0. Thread-safety: one owner.
#pragma once

#include <string_view>

#include "ftp/protocol/reply.h"

namespace san::ftp {

class OwedReplies {
 public:
  enum class Fed {
    kNeedMore,  // inside a multi-line reply
    kReply,     // reply() is complete (a final one settled the oldest owed command)
    kBad,       // not a reply line: the dialogue can no longer be followed
  };

  // A command went out (or a connection was made: its greeting is owed).
  void CommandSent() { ++owed_; }
  // One control line without its CRLF.
  Fed Feed(std::string_view line);
  const Reply& reply() const { return assembler_.reply(); }
  int owed() const { return owed_; }
  // The connection is gone (or new): nothing owed, nothing half read.
  void Reset() { *this = OwedReplies(); }

 private:
  ReplyAssembler assembler_;
  int owed_ = 0;
};

}  // namespace san::ftp
