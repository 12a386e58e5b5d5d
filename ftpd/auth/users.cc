#include "ftpd/auth/users.h"

#include <crypt.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

namespace san::ftp {
namespace {

// A valid hash nobody's password matches: makes an unknown user cost a real crypt.
constexpr const char* kDummyHash =
    "$6$q2uR5JcKx0pZ$"
    "5PcBi8pj7yZ5W8mXh4gD6kJ1oLq6B0nU3TtQ1oA8x9mHq0eYyH1s2WmVd3rT0kR9gqYf7zqk3iG2b0e8/FpUu.";

bool ConstantTimeEqual(const char* a, const char* b) {
  const size_t la = strlen(a), lb = strlen(b);
  unsigned char diff = la != lb;
  const size_t n = la < lb ? la : lb;
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

bool CheckPassword(std::string_view password, const std::string& hash) {
  auto data = std::make_unique<crypt_data>();  // ~32 KiB: not on the stack
  const std::string pw(password);
  const char* out = crypt_r(pw.c_str(), hash.c_str(), data.get());
  // crypt_r returns a "*..." failure token (never equal to a valid hash) on a bad setting.
  return out && out[0] != '*' && ConstantTimeEqual(out, hash.c_str());
}

Result<std::string> HashPassword(std::string_view password, const char* prefix) {
  char salt[CRYPT_GENSALT_OUTPUT_SIZE];
  if (!crypt_gensalt_rn(prefix, 0, nullptr, 0, salt, sizeof salt)) {
    return Status::FromErrno("crypt_gensalt_rn");
  }
  auto data = std::make_unique<crypt_data>();
  const std::string pw(password);
  const char* out = crypt_r(pw.c_str(), salt, data.get());
  if (!out || out[0] == '*') return Status(EINVAL, "crypt_r");
  return std::string(out);
}

Result<Users> Users::Parse(std::string_view text, std::string* error) {
  Users users;
  std::istringstream in{std::string(text)};
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& why) {
    *error = "users file line " + std::to_string(number) + ": " + why;
    return Status(EINVAL, "users file");
  };
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    size_t pos = 0;
    while (true) {
      const size_t colon = line.find(':', pos);
      f.push_back(line.substr(pos, colon == std::string::npos ? std::string::npos : colon - pos));
      if (colon == std::string::npos) break;
      pos = colon + 1;
    }
    if (f.size() < 3 || f.size() > 5) return fail("expected name:hash:root[:rw|ro[:system-user]]");
    Account a{f[0], f[1], f[2], true, ""};
    if (a.name.empty()) return fail("empty user name");
    if (a.hash.empty() || a.hash[0] != '$') return fail("hash is not a crypt(3) string");
    if (a.root.empty() || a.root[0] != '/') return fail("root must be an absolute path");
    if (f.size() >= 4) {
      if (f[3] == "ro") {
        a.writable = false;
      } else if (f[3] != "rw") {
        return fail("access must be rw or ro");
      }
    }
    if (f.size() == 5 && !f[4].empty()) {
      // A login name as useradd(8) accepts them (no option-like or path-like names).
      const std::string& u = f[4];
      bool good = !u.empty() && u.size() <= 32 && u[0] != '-';
      for (char c : u) {
        good = good && (isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.');
      }
      if (!good) return fail("bad system user name");
      a.system_user = u;
    }
    if (users.Find(a.name)) return fail("duplicate user " + a.name);
    users.accounts_.push_back(std::move(a));
  }
  return users;
}

Result<Users> Users::Load(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read users file " + path;
    return Status(ENOENT, "users file");
  }
  std::stringstream buf;
  buf << in.rdbuf();
  return Parse(buf.str(), error);
}

const Account* Users::Find(std::string_view name) const {
  for (const Account& a : accounts_) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const Account* Users::Verify(std::string_view name, std::string_view password) const {
  const Account* a = Find(name);
  const bool ok = CheckPassword(password, a ? a->hash : std::string(kDummyHash));
  return a && ok ? a : nullptr;
}

}  // namespace san::ftp
