#include "drpc/core/command_policy.h"

#include <fnmatch.h>

#include "sanlib/common/text_lines.h"

namespace san::drpc {

Result<CommandPolicy> CommandPolicy::Parse(std::string_view text, int* error_line) {
  *error_line = 0;
  CommandPolicy policy;
  TextLines lines(text);
  for (std::string_view line; lines.Next(&line);) {
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (line.empty()) continue;
    for (char c : line) {
      if (c == '\0' || c == ' ' || c == '\t') {
        *error_line = lines.number();
        return Status(EINVAL, "policy: one pattern per line, no blanks or NUL inside");
      }
    }
    policy.Add(std::string(line));
  }
  return policy;
}

bool CommandPolicy::Allows(std::string_view argv0) const {
  if (argv0.empty() || argv0.find('\0') != std::string_view::npos) return false;
  const std::string name(argv0);
  for (const std::string& p : patterns_) {
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

}  // namespace san::drpc
