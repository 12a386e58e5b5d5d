#include "drpc/core/token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sanlib/common/unique_fd.h"

namespace san::drpc {

Result<std::string> ParseToken(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' ||
                           text.back() == '\t')) {
    text.remove_suffix(1);
  }
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  if (text.size() < 16) return Status(EINVAL, "token: shorter than 16 characters");
  if (text.size() > 1024) return Status(EINVAL, "token: longer than 1024 characters");
  for (char c : text) {
    if (c < 0x21 || c > 0x7e) return Status(EINVAL, "token: only printable ASCII, no blanks");
  }
  return std::string(text);
}

Result<std::string> LoadTokenFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return Status::FromErrno("open(token file)");
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) return Status::FromErrno("fstat(token file)");
  if (!S_ISREG(st.st_mode)) return Status(EINVAL, "token file: not a regular file");
  if (st.st_mode & 077) return Status(EPERM, "token file: readable by group or others (chmod 600)");
  std::string text;
  char buf[512];
  while (text.size() <= 4096) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read(token file)");
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return ParseToken(text);
}

bool TokenEquals(std::string_view a, std::string_view b) {
  // Length is not secret (it is in the file's size); the contents are.
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

std::string BearerHeader(std::string_view token) {
  std::string h = "Bearer ";
  h.append(token);
  return h;
}

std::string_view TokenFromBearer(std::string_view header) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (header.size() <= kPrefix.size() || header.substr(0, kPrefix.size()) != kPrefix) return {};
  return header.substr(kPrefix.size());
}

}  // namespace san::drpc
