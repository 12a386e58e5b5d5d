#include "sanlib/common/fd_placement.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sanlib/common/kernel.h"
#include "sanlib/common/unique_fd.h"

namespace san {
namespace {

// The highest the region may begin. fork() copies the fd table up to the highest open fd, and
// exit frees it: one fd of ours at 786,432 (a quarter below a container's 1,048,576) would make
// every fork of the process copy a 6 MiB table. The cost grows with the number (docs/compat.md
// "What sanrun costs a process").
constexpr rlim_t kHighestBase = 16384;

int HighBase() {
  static const int base = [] {
    rlimit limit{};
    return getrlimit(RLIMIT_NOFILE, &limit) == 0 ? HighFdBaseFor(limit.rlim_cur) : -1;
  }();
  return base;
}

// F_DUPFD_CLOEXEC as the kernel's fcntl: under the compatibility layer fcntl is interposed.
int DupAtLeast(int fd, int lowest) { return kernel::fcntl(fd, F_DUPFD_CLOEXEC, lowest); }

}  // namespace

int HighFdBaseFor(rlim_t soft_limit) {
  if (soft_limit == RLIM_INFINITY || soft_limit < 1024) return -1;
  const rlim_t top_quarter = soft_limit - soft_limit / 4;
  return static_cast<int>(top_quarter < kHighestBase ? top_quarter : kHighestBase);
}

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
