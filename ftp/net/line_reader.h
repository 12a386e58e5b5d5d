// Control-connection lines: reads CRLF (or bare LF) terminated lines from a Socket with a length
// limit and a timeout.
//
// A line longer than the limit is reported once as kTooLong and the rest of it, up to its
// terminator, is discarded, so a hostile client cannot make us buffer without bound. Lines already
// received stay buffered across calls (pipelined commands). Thread-safety: one owner.
#pragma once

#include <string>

#include "ftp/net/socket.h"

namespace san::ftp {

class LineReader {
 public:
  enum class Outcome { kLine, kEof, kTimeout, kTooLong, kError };

  LineReader(const Socket& socket, size_t max_line) : socket_(socket), max_line_(max_line) {}

  // Next line without its terminator in *line; waits up to timeout_ms for more bytes.
  // exact: never read past the line's LF (one byte per receive), for the last line before the
  // peer switches protocols on the same connection (the reply to AUTH SAN: the server's upgrade
  // bytes may follow it in the same segment and belong to san_upgrade, not to us).
  Outcome Next(int timeout_ms, std::string* line, bool exact = false);
  // Bytes received but not yet returned as lines (must be 0 before an in-band upgrade).
  size_t buffered() const { return buffer_.size(); }

 private:
  const Socket& socket_;
  size_t max_line_;
  std::string buffer_;
  bool discarding_ = false;  // inside an over-long line, until its LF
};

}  // namespace san::ftp
