// CommandPolicy: which commands a node runs for Exec and Submit.
//
// A policy is a list of glob patterns (fnmatch, no FNM_PATHNAME) matched against the request's
// argv[0] exactly as sent: "/usr/bin/uptime", "hostname", "/opt/jobs/*". The empty policy allows
// nothing: a node runs commands only after its operator listed them (drpcd --allow-cmd /
// --policy-file). "*" allows every command and has to be written on purpose. Arguments are not
// matched: a command that can run other commands (sh, env, xargs) allowed is everything allowed.
// Thread-safety: immutable after construction; Allows() may be called concurrently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sanlib/common/status.h"

namespace san::drpc {

class CommandPolicy {
 public:
  CommandPolicy() = default;
  explicit CommandPolicy(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {}

  // A policy file: one pattern per line, blanks around it ignored, '#' comments, empty lines.
  // EINVAL (and *error_line) for a pattern with a NUL byte or a blank inside.
  static Result<CommandPolicy> Parse(std::string_view text, int* error_line);

  void Add(std::string pattern) { patterns_.push_back(std::move(pattern)); }
  // argv0 empty or with a NUL byte is never allowed.
  bool Allows(std::string_view argv0) const;
  bool empty() const { return patterns_.empty(); }
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  std::vector<std::string> patterns_;
};

}  // namespace san::drpc
