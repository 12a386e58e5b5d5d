#include "files/virtual_path.h"

#include <vector>

namespace san::files {

std::optional<std::string> ResolveVirtual(std::string_view cwd, std::string_view arg) {
  if (arg.find('\0') != std::string_view::npos) return std::nullopt;
  std::vector<std::string_view> parts;
  auto push = [&parts](std::string_view path) {
    size_t pos = 0;
    while (pos <= path.size()) {
      size_t slash = path.find('/', pos);
      if (slash == std::string_view::npos) slash = path.size();
      std::string_view part = path.substr(pos, slash - pos);
      if (part == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!part.empty() && part != ".") {
        parts.push_back(part);
      }
      pos = slash + 1;
    }
  };
  if (arg.empty() || arg[0] != '/') push(cwd);
  push(arg);
  std::string out;
  for (std::string_view p : parts) out.append("/").append(p);
  if (out.empty()) out.push_back('/');  // not = "/": a GCC 12 -Wrestrict false positive
  return out;
}

std::string BaseName(std::string_view canonical) {
  const size_t slash = canonical.rfind('/');
  return std::string(slash == std::string_view::npos ? canonical : canonical.substr(slash + 1));
}

std::string DirName(std::string_view canonical) {
  const size_t slash = canonical.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return "/";
  return std::string(canonical.substr(0, slash));
}

}  // namespace san::files
