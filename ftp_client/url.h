// ftp:// URLs for batch mode (RFC 1738 section 3.2): ftp://[user[:password]@]host[:port]/path.
//
// Pure (unit-tested and fuzzed). %XX escapes are decoded in user, password and path; an escaped
// '/' or a NUL is refused (it would change what the path means), and so are control bytes (CR, LF: command injection). IPv6 hosts go in brackets.
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace san::ftp {

struct FtpUrl {
  std::string user;      // "" when absent: anonymous
  std::string password;
  bool has_password = false;
  std::string host;
  uint16_t port = 21;
  std::string path;      // decoded, without the leading '/' ("" for the login directory)
};

std::optional<FtpUrl> ParseFtpUrl(std::string_view url);
// %XX decoding; nullopt on a bad escape or a decoded NUL (and '/' unless allow_slash).
std::optional<std::string> PercentDecode(std::string_view s, bool allow_slash);

}  // namespace san::ftp
