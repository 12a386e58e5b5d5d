#include "ftp/protocol/address.h"

#include <arpa/inet.h>

#include <cstring>

namespace san::ftp {
namespace {

// A decimal 0..max with 1..digits digits.
std::optional<uint32_t> ParseSmall(std::string_view s, uint32_t max) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > max) return std::nullopt;
  return v;
}

std::optional<HostPort> FromSix(const uint32_t (&n)[6]) {
  HostPort hp;
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  const uint32_t a = n[0] << 24 | n[1] << 16 | n[2] << 8 | n[3];
  sin.sin_addr.s_addr = htonl(a);
  sin.sin_port = htons(static_cast<uint16_t>(n[4] << 8 | n[5]));
  memcpy(&hp.addr, &sin, sizeof sin);
  hp.len = sizeof sin;
  return hp;
}

std::optional<HostPort> ParseSix(std::string_view arg) {
  uint32_t n[6];
  size_t pos = 0;
  for (int i = 0; i < 6; ++i) {
    size_t comma = arg.find(',', pos);
    if (i == 5) {
      if (comma != std::string_view::npos) return std::nullopt;
      comma = arg.size();
    } else if (comma == std::string_view::npos) {
      return std::nullopt;
    }
    auto v = ParseSmall(arg.substr(pos, comma - pos), 255);
    if (!v) return std::nullopt;
    n[i] = *v;
    pos = comma + 1;
  }
  return FromSix(n);
}

}  // namespace

uint16_t HostPort::port() const {
  if (addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  }
  return 0;
}

std::string HostPort::host() const {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&addr)->sin_addr, buf, sizeof buf);
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

HostPort MakeHostPort(const sockaddr* sa, socklen_t len) {
  HostPort hp;
  if (len > sizeof hp.addr) len = sizeof hp.addr;
  memcpy(&hp.addr, sa, len);
  hp.len = len;
  return hp;
}

std::optional<HostPort> ParsePortArg(std::string_view arg) { return ParseSix(arg); }

std::string FormatPortArg(const HostPort& hp) {
  const auto* sin = reinterpret_cast<const sockaddr_in*>(&hp.addr);
  const uint32_t a = ntohl(sin->sin_addr.s_addr);
  const uint16_t p = ntohs(sin->sin_port);
  char buf[64];
  snprintf(buf, sizeof buf, "%u,%u,%u,%u,%u,%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255,
           p >> 8, p & 255);
  return buf;
}

std::optional<HostPort> ParseEprtArg(std::string_view arg) {
  if (arg.size() < 8 || arg.size() > 128) return std::nullopt;
  const char d = arg[0];
  if (d < 33 || d > 126 || arg.back() != d) return std::nullopt;
  // d af d addr d port d
  const size_t p1 = arg.find(d, 1);
  if (p1 == std::string_view::npos) return std::nullopt;
  const size_t p2 = arg.find(d, p1 + 1);
  if (p2 == std::string_view::npos) return std::nullopt;
  const size_t p3 = arg.find(d, p2 + 1);
  if (p3 != arg.size() - 1) return std::nullopt;
  const auto af = ParseSmall(arg.substr(1, p1 - 1), 2);
  const std::string addr(arg.substr(p1 + 1, p2 - p1 - 1));
  const auto port = ParseSmall(arg.substr(p2 + 1, p3 - p2 - 1), 65535);
  if (!af || !port || addr.empty()) return std::nullopt;
  HostPort hp;
  if (*af == 1) {
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(static_cast<uint16_t>(*port));
    if (inet_pton(AF_INET, addr.c_str(), &sin.sin_addr) != 1) return std::nullopt;
    memcpy(&hp.addr, &sin, sizeof sin);
    hp.len = sizeof sin;
  } else if (*af == 2) {
    sockaddr_in6 sin6{};
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(static_cast<uint16_t>(*port));
    if (inet_pton(AF_INET6, addr.c_str(), &sin6.sin6_addr) != 1) return std::nullopt;
    memcpy(&hp.addr, &sin6, sizeof sin6);
    hp.len = sizeof sin6;
  } else {
    return std::nullopt;
  }
  return hp;
}

std::string FormatEprtArg(const HostPort& hp) {
  std::string out = hp.family() == AF_INET6 ? "|2|" : "|1|";
  out.append(hp.host()).append("|").append(std::to_string(hp.port())).append("|");
  return out;
}

std::optional<uint16_t> ParseEpsvReply(std::string_view text) {
  const size_t open = text.find('(');
  if (open == std::string_view::npos) return std::nullopt;
  const size_t close = text.find(')', open);
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view inner = text.substr(open + 1, close - open - 1);
  // d d d port d
  if (inner.size() < 5) return std::nullopt;
  const char d = inner[0];
  if (inner[1] != d || inner[2] != d || inner.back() != d) return std::nullopt;
  auto port = ParseSmall(inner.substr(3, inner.size() - 4), 65535);
  if (!port || *port == 0) return std::nullopt;
  return static_cast<uint16_t>(*port);
}

std::optional<HostPort> ParsePasvReply(std::string_view text) {
  // The first digit run after the code's text starts the six numbers.
  size_t start = text.find('(');
  if (start != std::string_view::npos) {
    const size_t close = text.find(')', start);
    if (close == std::string_view::npos) return std::nullopt;
    return ParseSix(text.substr(start + 1, close - start - 1));
  }
  start = text.find_first_of("0123456789");
  if (start == std::string_view::npos) return std::nullopt;
  size_t end = start;
  while (end < text.size() && (text[end] == ',' || (text[end] >= '0' && text[end] <= '9'))) ++end;
  return ParseSix(text.substr(start, end - start));
}

std::optional<uint64_t> ParseOffset(std::string_view arg) {
  if (arg.empty() || arg.size() > 18) return std::nullopt;  // < 2^63 for any 18 digits
  uint64_t v = 0;
  for (char c : arg) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

}  // namespace san::ftp
