#include "compat/policy.h"

#include <errno.h>
#include <netinet/in.h>

#include <cstdio>
#include <string>

#include "san/san.h"
#include "sanlib/common/config.h"
#include "sanlib/common/small_file.h"

namespace san::compat {

const Policy& Policy::Get() {
  static const Policy policy;
  return policy;
}

Policy::Policy() {
  const Config& config = Config::Get();
  off_ = config.provider == ProviderChoice::kOff;
  std::string error;
  bool ok = Rules::Parse(config.rules, "SAN_RULES", &rules_, &error);
  if (ok && !config.rules_file.empty()) {
    std::string text;
    Rules from_file;
    if (!ReadSmallFile(config.rules_file, &text)) {
      error = "SAN_RULES_FILE " + config.rules_file + ": cannot be read";
      ok = false;
    } else if ((ok = Rules::Parse(text, config.rules_file, &from_file, &error))) {
      rules_.Append(from_file);
    }
  }
  if (!ok) {
    fprintf(stderr, "sanlib: %s; all sockets stay plain kernel sockets\n", error.c_str());
    off_ = true;
  }
  // The system-wide file's rules come last, parsed one line at a time (padded to its place in the
  // file, so errors carry the file's line and column): a bad line there is reported and ignored,
  // as its other lines are (common/config_file.h).
  for (const Config::FileRule& rule : config.file_rules) {
    const std::string placed =
        std::string(rule.line - 1, '\n') + std::string(rule.column - 1, ' ') + rule.text;
    Rules one;
    std::string rule_error;
    if (Rules::Parse(placed, config.config_file, &one, &rule_error)) {
      rules_.Append(one);
    } else {
      fprintf(stderr, "sanlib: %s; line ignored\n", rule_error.c_str());
    }
  }
}

bool Policy::AdmitSocket(int domain, int type, int protocol) const {
  if (off_) return false;
  const int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (domain != AF_INET && domain != AF_INET6) return false;
  if (base != SOCK_STREAM && base != SOCK_SAN) return false;
  if (protocol != 0 && protocol != IPPROTO_TCP) return false;
  return rules_.Evaluate(RuleSubject{program_invocation_short_name, nullptr, 0}) == Verdict::kAllow;
}

bool Policy::AdmitAddress(const sockaddr* addr, socklen_t len) const {
  if (off_) return false;
  if (!addr) return true;  // nothing to match an address rule against
  return rules_.Evaluate(RuleSubject{program_invocation_short_name, addr, len}) == Verdict::kAllow;
}

}  // namespace san::compat
