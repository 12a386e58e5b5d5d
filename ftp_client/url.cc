#include "ftp_client/url.h"

namespace san::ftp {
namespace {

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> PercentDecode(std::string_view s, bool allow_slash) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      // Control bytes, raw or escaped, would end or inject an FTP command line.
      if (static_cast<unsigned char>(s[i]) < 0x20 || s[i] == 0x7f) return std::nullopt;
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = Hex(s[i + 1]), lo = Hex(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    const char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0' || (c == '/' && !allow_slash) || c == '\r' || c == '\n') return std::nullopt;
    out.push_back(c);
    i += 2;
  }
  return out;
}

std::optional<FtpUrl> ParseFtpUrl(std::string_view url) {
  constexpr std::string_view kScheme = "ftp://";
  if (url.size() < kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (static_cast<char>(tolower(static_cast<unsigned char>(url[i]))) != kScheme[i])
      return std::nullopt;
  }
  url.remove_prefix(kScheme.size());
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  std::string_view path =
      slash == std::string_view::npos ? std::string_view() : url.substr(slash + 1);
  FtpUrl out;
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority.remove_prefix(at + 1);
    const size_t colon = userinfo.find(':');
    auto user = PercentDecode(userinfo.substr(0, colon), false);
    if (!user) return std::nullopt;
    out.user = *user;
    if (colon != std::string_view::npos) {
      auto pw = PercentDecode(userinfo.substr(colon + 1), true);
      if (!pw) return std::nullopt;
      out.password = *pw;
      out.has_password = true;
    }
  }
  std::string_view port_text;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return std::nullopt;
      port_text = rest.substr(1);
    }
  } else {
    const size_t colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return std::nullopt;
  for (char c : out.host) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_')) {
      return std::nullopt;
    }
  }
  if (!port_text.empty()) {
    if (port_text.size() > 5) return std::nullopt;
    unsigned v = 0;
    for (char c : port_text) {
      if (c < '0' || c > '9') return std::nullopt;
      v = v * 10 + static_cast<unsigned>(c - '0');
    }
    if (v == 0 || v > 65535) return std::nullopt;
    out.port = static_cast<uint16_t>(v);
  }
  // ";type=i" and friends (RFC 1738) are not supported: refuse rather than misread them.
  if (path.find(';') != std::string_view::npos) return std::nullopt;
  auto decoded = PercentDecode(path, true);
  if (!decoded) return std::nullopt;
  out.path = *decoded;
  return out;
}

}  // namespace san::ftp
