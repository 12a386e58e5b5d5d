#include "ftp/protocol/reply.h"

#include <cstdio>

namespace san::ftp {
namespace {

// The code of "ddd" at the start of line, or -1.
int CodeOf(std::string_view line) {
  if (line.size() < 3) return -1;
  for (int i = 0; i < 3; ++i) {
    if (line[i] < '0' || line[i] > '9') return -1;
  }
  if (line[0] < '1' || line[0] > '5') return -1;
  return (line[0] - '0') * 100 + (line[1] - '0') * 10 + (line[2] - '0');
}

}  // namespace

std::string FormatReply(int code, std::string_view text) {
  char num[8];
  snprintf(num, sizeof num, "%03d", code % 1000);
  const size_t nl = text.find('\n');
  std::string out;
  if (nl == std::string_view::npos) {
    out.append(num).append(" ").append(text).append("\r\n");
    return out;
  }
  out.append(num).append("-").append(text.substr(0, nl)).append("\r\n");
  std::string_view rest = text.substr(nl + 1);
  while (true) {
    const size_t next = rest.find('\n');
    if (next == std::string_view::npos) break;
    out.append(" ").append(rest.substr(0, next)).append("\r\n");
    rest = rest.substr(next + 1);
  }
  out.append(num).append(" ").append(rest).append("\r\n");
  return out;
}

ReplyAssembler::Result ReplyAssembler::Feed(std::string_view line) {
  const int code = CodeOf(line);
  if (!in_multi_) {
    if (code < 0) return Result::kBad;
    reply_ = Reply{code, ""};
    const char sep = line.size() > 3 ? line[3] : ' ';
    reply_.text = std::string(line.size() > 4 ? line.substr(4) : std::string_view());
    if (sep == '-') {
      in_multi_ = true;
      multi_code_ = code;
      return Result::kNeedMore;
    }
    if (sep != ' ') return Result::kBad;
    return Result::kDone;
  }
  // Inside a multi-line reply any line is text until "code " with the same code.
  if (code == multi_code_ && (line.size() == 3 || line[3] == ' ')) {
    in_multi_ = false;
    reply_.text.append("\n").append(line.size() > 4 ? line.substr(4) : std::string_view());
    return Result::kDone;
  }
  reply_.text.append("\n").append(line);
  return Result::kNeedMore;
}

}  // namespace san::ftp
