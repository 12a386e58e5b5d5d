#include "drpc/core/target.h"

#include <cctype>

namespace san::drpc {
namespace {

// Letters, digits, '-', '.', '_' (names and IPv4), ':' and '%' inside brackets (IPv6, zone id).
bool ValidHost(std::string_view h, bool bracketed) {
  if (h.empty() || h.size() > 253) return false;
  for (char c : h) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '.' || c == '_') continue;
    if (bracketed && (c == ':' || c == '%')) continue;
    return false;
  }
  return true;
}

bool ParsePort(std::string_view text, bool allow_zero, uint16_t* port) {
  if (text.empty() || text.size() > 5) return false;
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if ((v == 0 && !allow_zero) || v > 65535) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

}  // namespace

namespace {

Result<Target> Parse(std::string_view spec, uint16_t default_port, bool listen) {
  Target t;
  t.spec = std::string(spec);
  t.port = default_port;
  std::string_view rest = spec;
  const size_t scheme_end = rest.find("://");
  if (scheme_end != std::string_view::npos) {
    if (listen) return Status(EINVAL, "listen address: no scheme (host:port)");
    const std::string_view scheme = rest.substr(0, scheme_end);
    if (scheme == "san") {
      t.san = true;
    } else if (scheme != "tcp") {
      return Status(EINVAL, "target: unknown scheme (use san:// or tcp://)");
    }
    rest.remove_prefix(scheme_end + 3);
  }
  std::string_view host;
  std::string_view port;
  bool bracketed = false;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos) return Status(EINVAL, "target: unbalanced '['");
    host = rest.substr(1, close - 1);
    bracketed = true;
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Status(EINVAL, "target: junk after ']'");
      port = after.substr(1);
      if (port.empty()) return Status(EINVAL, "target: empty port");
    }
  } else {
    const size_t colon = rest.find(':');
    host = rest.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = rest.substr(colon + 1);
      if (port.empty()) return Status(EINVAL, "target: empty port");
    }
  }
  if (!ValidHost(host, bracketed)) return Status(EINVAL, "target: bad host name or address");
  if (!port.empty() && !ParsePort(port, listen, &t.port)) {
    return Status(EINVAL, listen ? "listen address: port is not a number 0-65535"
                                 : "target: port is not a number 1-65535");
  }
  t.host = std::string(host);
  return t;
}

}  // namespace

Result<Target> ParseTarget(std::string_view spec, uint16_t default_port) {
  return Parse(spec, default_port, false);
}

Result<Target> ParseListenAddress(std::string_view spec) { return Parse(spec, kDefaultPort, true); }

}  // namespace san::drpc
