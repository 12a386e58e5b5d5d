#include "ftp/protocol/command.h"

#include <cctype>

namespace san::ftp {
namespace {

constexpr unsigned char kIac = 255;
constexpr unsigned char kWill = 251;
constexpr unsigned char kDont = 254;

ParseOutcome Fail(int code, std::string text) {
  ParseOutcome out;
  out.reply_code = code;
  out.reply_text = std::move(text);
  return out;
}

}  // namespace

std::string StripTelnet(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c != kIac) {
      out.push_back(line[i]);
      continue;
    }
    if (i + 1 >= line.size()) break;  // a lone IAC at the end: drop it
    const auto cmd = static_cast<unsigned char>(line[i + 1]);
    if (cmd == kIac) {
      out.push_back(static_cast<char>(kIac));
      ++i;
    } else if (cmd >= kWill && cmd <= kDont) {
      i += 2;  // option negotiation: IAC cmd option (we negotiate nothing)
    } else {
      ++i;  // IAC IP, IAC DM, IAC NOP, ...
    }
  }
  return out;
}

ParseOutcome ParseCommand(std::string_view raw) {
  if (raw.size() > kMaxCommandLine) return Fail(500, "Command line too long.");
  const std::string line = StripTelnet(raw);
  for (char c : line) {
    if (c == '\0' || c == '\r' || c == '\n') return Fail(500, "Control characters in command.");
  }
  size_t verb_end = 0;
  while (verb_end < line.size() && line[verb_end] != ' ') ++verb_end;
  if (verb_end < 3 || verb_end > 4) return Fail(500, "Syntax error, command unrecognized.");
  ParseOutcome out;
  for (size_t i = 0; i < verb_end; ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (!std::isalpha(c)) return Fail(500, "Syntax error, command unrecognized.");
    out.command.verb.push_back(static_cast<char>(std::toupper(c)));
  }
  if (verb_end < line.size()) {
    // RFC 959 has exactly one space before the argument; keep the rest verbatim (file names may
    // begin or end with spaces).
    out.command.has_arg = true;
    out.command.arg = line.substr(verb_end + 1);
  }
  out.ok = true;
  return out;
}

}  // namespace san::ftp
