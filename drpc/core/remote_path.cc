#include "drpc/core/remote_path.h"

#include <climits>

namespace san::drpc {

Result<std::string> CanonicalRemotePath(std::string_view path) {
  if (path.empty()) return Status(EINVAL, "path: empty");
  if (path.size() >= PATH_MAX) return Status(EINVAL, "path: too long");
  if (path.find('\0') != std::string_view::npos) return Status(EINVAL, "path: NUL byte");
  std::string out;
  while (!path.empty()) {
    const size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") return Status(EPERM, "path: '..' is not allowed");
    out.push_back('/');
    out.append(part);
  }
  if (out.empty()) return Status(EISDIR, "path: names the root itself");
  return out;
}

}  // namespace san::drpc
