// Interposed close_range() and closefrom(): programs close every inherited fd before exec with
// them (openbsd-inetd's child: close_range(3, ~0U, 0)). Passed straight to the kernel they would
// close sanlib's own fds too -- a connection's segment, doorbells and fork-holder pipe, the
// connection thread's sockets -- and the exec hand-off of the service's socket then found its
// connection gone (the service got a reset socket: every inetd service returned 0 bytes to a
// sanrun client). Here, within the range:
//   - each SAN socket is closed as close() closes it (its peer gets FIN, dups keep it);
//   - sanlib's own fds, which live in a region at the top of the fd space (common/fd_placement.h),
//     stay: that part of the range is left alone (an application's own fds up there stay open
//     too; they are close-on-exec in practice, and exec closes them); so do the few placed from
//     1,024 up (PlaceLow), each recognised by its number and file;
//   - everything else is closed as the kernel would.
// CLOSE_RANGE_CLOEXEC only marks fds (ours are close-on-exec already): the kernel's call.
// Without a high region (RLIMIT_NOFILE below 1024 or unlimited), ours cannot be told from the
// program's: SAN sockets are closed properly and the rest goes to the kernel as asked.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/close_range.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "compat/errno_keeper.h"
#include "compat/managed.h"
#include "compat/real_calls.h"
#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/open_fds.h"
#include "sanlib/common/raw_syscall.h"
#include "sanlib/socket/runtime.h"
#include "sanlib/socket/socket_ops.h"

using san::compat::KeepErrno;
using san::compat::Managed;
using san::compat::Real;

namespace {

int CloseRange(unsigned first, unsigned last, int flags) {
  auto kernel = [&](unsigned a, unsigned b, int f) {
    return Real().close_range ? Real().close_range(a, b, f)
                              : static_cast<int>(san::Syscall(SYS_close_range, a, b, f));
  };
  const int high = san::HighFdBase();
  // A vfork child closes its own copies; what they belong to is its parent's (runtime.h). Ours
  // stay in its table until its exec closes them, as its close() leaves them (socket_ops.cc).
  const bool vfork_child = san::Runtime::InVforkChild();
  if (!san::Runtime::IfCreated() || (flags & CLOSE_RANGE_CLOEXEC) || first > last ||
      (vfork_child && (high <= 0 || (flags & ~CLOSE_RANGE_UNSHARE)))) {
    return kernel(first, last, flags);
  }
  if (flags & ~CLOSE_RANGE_UNSHARE) {
    errno = EINVAL;
    return -1;
  }
  if ((flags & CLOSE_RANGE_UNSHARE) && san::Syscall(SYS_unshare, CLONE_FILES) != 0) return -1;
  const unsigned top = high > 0 ? std::min(last, static_cast<unsigned>(high) - 1) : last;
  // The kernel's call below our region, around the few of ours from 1,024 up.
  auto close_around_ours = [&]() {
    unsigned from = first;
    for (int fd : san::PlacedLowIn(static_cast<int>(std::min<unsigned>(first, INT_MAX)),
                                   static_cast<int>(std::min<unsigned>(top, INT_MAX)))) {
      if (static_cast<unsigned>(fd) > from) kernel(from, static_cast<unsigned>(fd) - 1, 0);
      from = static_cast<unsigned>(fd) + 1;
    }
    return from <= top ? kernel(from, top, 0) : 0;
  };
  if (vfork_child) {
    // Our region stays open until the exec, but marked close-on-exec as a whole (ours are
    // already): a program's inheritable fd up there does not reach the new image, as if closed
    // -- one call, where looking at each of thousands of fds cost a spawn milliseconds.
    const unsigned from = std::max(first, static_cast<unsigned>(high));
    std::vector<int> up;
    if (last >= from && kernel(from, last, CLOSE_RANGE_CLOEXEC) != 0 &&
        san::OpenFds(from, last, &up)) {
      // A kernel before 5.11: each fd up there that is not close-on-exec, closed.
      for (int fd : up) {
        if (!san::kernel::CloseOnExec(fd))
          kernel(static_cast<unsigned>(fd), static_cast<unsigned>(fd), 0);
      }
    }
    return first <= top ? close_around_ours() : 0;
  }
  if (first > top) return 0;  // only our region: nothing of the program's to close
  std::vector<int> fds;
  if (!san::OpenFds(first, top, &fds)) {
    // No /proc: SAN sockets the proper way, then the rest.
    san::Runtime::Get().table().ForEachNumber([&](int fd, san::SanSocket*) {
      if (fd >= static_cast<int>(first) && fd <= static_cast<int>(top)) fds.push_back(fd);
    });
    for (int fd : fds) san::Close(fd);
    return close_around_ours();
  }
  for (int fd : fds) {
    if (san::IsPlacedLow(fd)) continue;  // ours, not the program's
    if (Managed(fd)) {
      san::Close(fd);
    } else {
      san::EpollClosed(fd);
      Real().close(fd);
    }
  }
  return 0;
}

}  // namespace

extern "C" {

int close_range(unsigned int first, unsigned int last, int flags) {
  return KeepErrno([&] { return CloseRange(first, last, flags); });
}

void closefrom(int lowfd) {
  const int saved = errno;
  CloseRange(lowfd < 0 ? 0 : static_cast<unsigned>(lowfd), UINT_MAX, 0);
  errno = saved;
}

}  // extern "C"
