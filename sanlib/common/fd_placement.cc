#include "sanlib/common/fd_placement.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sanlib/common/kernel.h"
#include "sanlib/common/unique_fd.h"

namespace san {
namespace {

int HighBase() {
  static const int base = [] {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
        limit.rlim_cur < 1024) {
      return -1;
    }
    const rlim_t cur = limit.rlim_cur > (1u << 20) ? (1u << 20) : limit.rlim_cur;
    return static_cast<int>(cur - cur / 4);
  }();
  return base;
}

// F_DUPFD_CLOEXEC as the kernel's fcntl: under the compatibility layer fcntl is interposed.
int DupAtLeast(int fd, int lowest) { return kernel::fcntl(fd, F_DUPFD_CLOEXEC, lowest); }

}  // namespace

int HighFdBase() { return HighBase(); }

int PlaceHigh(int fd) {
  const int base = HighBase();
  if (fd < 0 || base < 0 || fd >= base) return fd;
  const int moved = DupAtLeast(fd, base);
  if (moved < 0) return fd;  // no room up there: keep the low one
  KernelClose(fd);
  return moved;
}

int DupHigh(int fd) {
  const int base = HighBase();
  if (base >= 0) {
    const int high = DupAtLeast(fd, base);
    if (high >= 0) return high;
  }
  return DupAtLeast(fd, 0);
}

}  // namespace san
