// The FTP command-line parser (RFC 959 section 4.1, 5.3): one control line in, one Command out.
//
// A pure function of its input (no I/O, no state), so it is unit-tested and fuzzed
// (tests/ftpd/command_fuzz.cc, tests/ftpd/command_fuzz_replay_test.cc). Telnet option
// negotiation and the IAC IP / IAC DM sequences clients send before ABOR are stripped here; a
// line with NUL, CR or LF inside it, a verb that is not 3-4 letters, or an over-long line is
// rejected with the reply code the session should send.
// Thread-safety: stateless.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace san::ftp {

// The longest control line we accept (bytes, without CRLF). Paths up to PATH_MAX fit.
inline constexpr size_t kMaxCommandLine = 4096 + 16;

struct Command {
  std::string verb;  // upper case, 3 or 4 letters
  std::string arg;   // everything after the first space, verbatim ("" if none)
  bool has_arg = false;
};

struct ParseOutcome {
  bool ok = false;
  Command command;
  int reply_code = 0;      // when !ok: 500 (syntax) or 501 (arguments)
  std::string reply_text;  // when !ok: a short human reason
};

// `line` is one control line without its terminating CRLF (a bare LF terminator is tolerated by
// the reader, which strips it too).
ParseOutcome ParseCommand(std::string_view line);

// Removes Telnet commands (IAC x, IAC WILL/WONT/DO/DONT opt) and un-doubles IAC IAC.
std::string StripTelnet(std::string_view line);

}  // namespace san::ftp
