#include "sanlib/common/small_file.h"

#include <errno.h>
#include <fcntl.h>

#include "sanlib/common/kernel.h"
#include "sanlib/common/unique_fd.h"

namespace san {

bool ReadSmallFile(const std::string& path, std::string* out, size_t max) {
  out->clear();
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  char buf[4096];
  for (;;) {
    const ssize_t n = kernel::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    if (out->size() + static_cast<size_t>(n) > max) {
      errno = EFBIG;
      return false;
    }
    out->append(buf, static_cast<size_t>(n));
  }
}

std::string FirstLineOf(const std::string& path) {
  std::string text;
  if (!ReadSmallFile(path, &text, 64 * 1024)) return "";
  return text.substr(0, text.find('\n'));
}

}  // namespace san
