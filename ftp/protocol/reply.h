// FTP replies (RFC 959 section 4.2): formatting on the server, assembling on the client.
//
// ReplyAssembler is fed the control lines a server sends, one at a time, and yields a Reply when
// a single-line reply or the last line of a multi-line one ("123-first" ... "123 last") arrives.
// Pure logic, fuzzed with the command parser. Thread-safety: one owner per assembler.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace san::ftp {

struct Reply {
  int code = 0;
  std::string text;  // the lines' texts (without the code) joined by '\n'

  bool positive_preliminary() const { return code >= 100 && code < 200; }
  bool positive() const { return code >= 200 && code < 400; }
};

// "code text\r\n"; a text with '\n' in it becomes a multi-line reply whose inner lines start with a
// space (so no inner line can look like the terminating "code " line).
std::string FormatReply(int code, std::string_view text);

class ReplyAssembler {
 public:
  enum class Result { kNeedMore, kDone, kBad };
  // Feed one line (without CRLF). kDone: reply() is complete; kBad: not a reply line.
  Result Feed(std::string_view line);
  const Reply& reply() const { return reply_; }

 private:
  Reply reply_;
  bool in_multi_ = false;
  int multi_code_ = 0;
};

}  // namespace san::ftp
