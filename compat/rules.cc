#include "compat/rules.h"

#include <arpa/inet.h>
#include <fnmatch.h>

#include <cstring>

#include "sanlib/common/inet_address.h"

namespace san::compat {
namespace {

bool ParsePort(std::string_view text, uint16_t* out) {
  if (text.empty() || text.size() > 5) return false;
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > 65535) return false;
  *out = static_cast<uint16_t>(v);
  return true;
}

bool ParsePorts(std::string_view text, std::pair<uint16_t, uint16_t>* out) {
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    if (!ParsePort(text, &out->first)) return false;
    out->second = out->first;
    return true;
  }
  return ParsePort(text.substr(0, dash), &out->first) &&
         ParsePort(text.substr(dash + 1), &out->second) && out->first <= out->second;
}

bool ParsePrefix(std::string_view text, Rule::Prefix* out) {
  std::string ip(text.substr(0, text.find('/')));
  int max_len;
  if (inet_pton(AF_INET, ip.c_str(), out->bytes) == 1) {
    out->family = AF_INET;
    max_len = 32;
  } else if (inet_pton(AF_INET6, ip.c_str(), out->bytes) == 1) {
    out->family = AF_INET6;
    max_len = 128;
  } else {
    return false;
  }
  out->length = max_len;
  if (ip.size() < text.size()) {
    std::string_view len = text.substr(ip.size() + 1);
    if (len.empty() || len.size() > 3) return false;
    int v = 0;
    for (char c : len) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    if (v > max_len) return false;
    out->length = v;
  }
  return true;
}

// The address and port of `sa` as the family's bytes; false for other families. IPv4-mapped IPv6
// addresses count as IPv4 (a dual-stack socket connecting to 127.0.0.1).
bool AddressOf(const sockaddr* sa, socklen_t len, int* family, uint8_t bytes[16], uint16_t* port) {
  const std::optional<InetAddress> a = ReduceInet(sa, len);
  if (!a) return false;
  *family = a->family;
  memcpy(bytes, a->bytes, 16);
  *port = a->port;
  return true;
}

bool PrefixMatches(const Rule::Prefix& p, int family, const uint8_t bytes[16]) {
  if (p.family != family) return false;
  const int whole = p.length / 8;
  if (memcmp(p.bytes, bytes, static_cast<size_t>(whole)) != 0) return false;
  const int rest = p.length % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (p.bytes[whole] & mask) == (bytes[whole] & mask);
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

}  // namespace

bool Rules::Parse(std::string_view text, std::string_view origin, Rules* out, std::string* error) {
  std::vector<Rule> rules;
  size_t line = 1, line_start = 0;
  size_t i = 0;
  auto fail = [&](size_t at, const char* what) {
    *error = std::string(origin);
    error->append(":").append(std::to_string(line)).append(":");
    error->append(std::to_string(at - line_start + 1)).append(": ").append(what);
    return false;
  };
  while (i <= text.size()) {
    // One rule: up to ';', newline, '#' or the end.
    std::vector<std::pair<size_t, std::string_view>> words;
    while (i < text.size() && text[i] != ';' && text[i] != '\n' && text[i] != '#') {
      if (IsSpace(text[i])) {
        ++i;
        continue;
      }
      const size_t start = i;
      while (i < text.size() && !IsSpace(text[i]) && text[i] != ';' && text[i] != '\n' &&
             text[i] != '#') {
        ++i;
      }
      words.emplace_back(start, text.substr(start, i - start));
    }
    if (i < text.size() && text[i] == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    }
    if (!words.empty()) {
      Rule rule;
      if (words[0].second == "allow") {
        rule.allow = true;
      } else if (words[0].second == "deny") {
        rule.allow = false;
      } else {
        return fail(words[0].first, "a rule starts with 'allow' or 'deny'");
      }
      for (size_t w = 1; w < words.size(); ++w) {
        const auto [at, word] = words[w];
        const size_t eq = word.find('=');
        if (eq == std::string_view::npos) return fail(at, "expected key=value");
        const std::string_view key = word.substr(0, eq), value = word.substr(eq + 1);
        if (key == "prog") {
          if (value.empty() || rule.prog) return fail(at, "prog= needs one non-empty pattern");
          rule.prog = std::string(value);
        } else if (key == "port") {
          std::pair<uint16_t, uint16_t> ports;
          if (rule.ports || !ParsePorts(value, &ports)) {
            return fail(at, "port= takes one port N or range N-M (0..65535, N <= M)");
          }
          rule.ports = ports;
        } else if (key == "addr") {
          Rule::Prefix prefix;
          if (rule.addr || !ParsePrefix(value, &prefix)) {
            return fail(at, "addr= takes one IPv4/IPv6 address with an optional /prefix length");
          }
          rule.addr = prefix;
        } else {
          return fail(at, "unknown condition (prog=, port=, addr=)");
        }
      }
      rules.push_back(std::move(rule));
    }
    if (i < text.size() && text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
    ++i;
  }
  out->rules_ = std::move(rules);
  return true;
}

Verdict Rules::Evaluate(const RuleSubject& subject) const {
  int family = 0;
  uint8_t bytes[16] = {};
  uint16_t port = 0;
  const bool have_address =
      subject.address && AddressOf(subject.address, subject.address_len, &family, bytes, &port);
  for (const Rule& r : rules_) {
    if (r.prog && fnmatch(r.prog->c_str(), std::string(subject.prog).c_str(), 0) != 0) continue;
    if ((r.ports || r.addr) && !have_address) continue;
    if (r.ports && (port < r.ports->first || port > r.ports->second)) continue;
    if (r.addr && !PrefixMatches(*r.addr, family, bytes)) continue;
    return r.allow ? Verdict::kAllow : Verdict::kDeny;
  }
  return Verdict::kAllow;
}

}  // namespace san::compat
