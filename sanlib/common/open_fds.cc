#include "sanlib/common/open_fds.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

#include "sanlib/common/raw_syscall.h"

namespace san {

bool OpenFds(unsigned first, unsigned last, std::vector<int>* out) {
  const int dir = static_cast<int>(
      Syscall(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) return false;
  alignas(8) char buf[4096];
  bool past_last = false;
  while (!past_last) {
    const long n = Syscall(SYS_getdents64, dir, buf, sizeof buf);
    if (n <= 0) break;
    for (long at = 0; at < n;) {
      const auto* d = reinterpret_cast<const dirent64*>(buf + at);
      at += d->d_reclen;
      char* end = nullptr;
      const long fd = strtol(d->d_name, &end, 10);
      if (end == d->d_name || *end != '\0' || fd == dir) continue;
      if (fd > static_cast<long>(last)) {
        past_last = true;
        break;
      }
      if (fd >= static_cast<long>(first)) out->push_back(static_cast<int>(fd));
    }
  }
  Syscall(SYS_close, dir);
  return true;
}

}  // namespace san
