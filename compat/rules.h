// Rules: which sockets of a preloaded program become SAN-capable (SAN_RULES, SAN_RULES_FILE).
//
// A rule is `allow` or `deny` followed by any of `prog=GLOB` (the program's name, fnmatch glob),
// `port=N` or `port=N-M`, `addr=IP` or `addr=IP/LEN` (IPv4 or IPv6 prefix). The rules are read in
// order and the first one whose every condition holds decides; when none does, the socket is
// allowed (AF_INET/AF_INET6 stream sockets are SAN-capable by default). At socket() only the
// program is known: rules with a port or address condition are skipped there and looked at again
// at connect() (the peer's address) and listen() (the bound address).
//
// Pure logic: parsing and matching take values and return results (unit-tested, fuzzed).
// Thread-safety: a parsed Rules value is immutable.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace san::compat {

struct Rule {
  bool allow = true;
  std::optional<std::string> prog;                     // fnmatch pattern
  std::optional<std::pair<uint16_t, uint16_t>> ports;  // inclusive range
  struct Prefix {
    int family = AF_INET;
    uint8_t bytes[16] = {};
    int length = 0;  // bits
  };
  std::optional<Prefix> addr;
};

struct RuleSubject {
  std::string_view prog;
  const sockaddr* address = nullptr;  // nullptr: not known yet (socket())
  socklen_t address_len = 0;
};

enum class Verdict { kAllow, kDeny };

class Rules {
 public:
  // Parses rules separated by ';' or newlines ('#' starts a comment to the end of the line).
  // On error returns false and sets *error to "<origin>:<line>:<column>: <what>".
  static bool Parse(std::string_view text, std::string_view origin, Rules* out, std::string* error);

  // Adds `later`'s rules after ours (SAN_RULES_FILE after SAN_RULES).
  void Append(const Rules& later) {
    rules_.insert(rules_.end(), later.rules_.begin(), later.rules_.end());
  }
  Verdict Evaluate(const RuleSubject& subject) const;
  bool empty() const { return rules_.empty(); }
  const std::vector<Rule>& rules() const { return rules_; }

 private:
  std::vector<Rule> rules_;
};

}  // namespace san::compat
