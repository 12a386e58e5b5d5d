// Interposed fd-life calls: dup, dup2, dup3, fcntl (and fcntl64), ioctl. A duplicate of a SAN
// socket names the same connection (closing one keeps it); an fd replaced by dup2/dup3 is released
// first, as the kernel closes it; O_NONBLOCK and FIONBIO reach the SAN path; FIONREAD counts SAN
// bytes.
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/ioctl.h>

#include "compat/errno_keeper.h"
#include "compat/managed.h"
#include "compat/real_calls.h"
#include "sanlib/common/kernel.h"
#include "sanlib/socket/socket_ops.h"

using san::compat::KeepErrno;
using san::compat::Managed;
using san::compat::Real;

namespace {

// dup2/dup3 onto `target`, one of them a SAN socket. The kernel closes what target was as part of
// the call; sanlib's side of it is released first, while target still names it (the close thread
// keeps its own reference to the kernel socket) -- but only once the call cannot fail for a bad fd.
int Duplicate(int fd, int target, int flags, bool is_dup3) {
  auto call = [&] { return is_dup3 ? Real().dup3(fd, target, flags) : Real().dup2(fd, target); };
  if (Real().fcntl(fd, F_GETFD) < 0 || (is_dup3 && (flags & ~O_CLOEXEC))) return call();
  if (san::Runtime::InVforkChild()) return call();  // the table is the parent's (runtime.h)
  san::Release(target);
  san::EpollClosed(target);
  const int result = call();
  if (result >= 0) san::NoteDuplicate(fd, target);
  return result;
}

int FcntlCommon(int (*real)(int, int, ...), int fd, int cmd, void* arg) {
  if (!Managed(fd)) return real(fd, cmd, arg);
  const long value = reinterpret_cast<long>(arg);
  switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
      const int copy = real(fd, cmd, value);
      if (copy >= 0) san::NoteDuplicate(fd, copy);
      return copy;
    }
    case F_GETFL:
    case F_SETFL:
      return san::Fcntl(fd, cmd, value);
    default:
      return real(fd, cmd, arg);
  }
}

}  // namespace

extern "C" {

int dup(int fd) {
  return KeepErrno([&]() -> int {
    const int copy = Real().dup(fd);
    if (copy >= 0 && Managed(fd)) san::NoteDuplicate(fd, copy);
    return copy;
  });
}

int dup2(int fd, int target) {
  return KeepErrno([&]() -> int {
    if (fd == target || (!Managed(fd) && !Managed(target))) {
      const int r = Real().dup2(fd, target);
      if (r >= 0 && fd != target) san::EpollClosed(target);
      return r;
    }
    return Duplicate(fd, target, 0, false);
  });
}

int dup3(int fd, int target, int flags) {
  return KeepErrno([&]() -> int {
    if (fd == target || (!Managed(fd) && !Managed(target))) {
      const int r = Real().dup3(fd, target, flags);
      if (r >= 0) san::EpollClosed(target);
      return r;
    }
    return Duplicate(fd, target, flags, true);
  });
}

// Every fcntl argument is an int, a pointer or nothing: all fit in one pointer-sized register.
int fcntl(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return KeepErrno([&] { return FcntlCommon(Real().fcntl, fd, cmd, arg); });
}

int fcntl64(int fd, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return KeepErrno(
      [&] { return FcntlCommon(Real().fcntl64 ? Real().fcntl64 : Real().fcntl, fd, cmd, arg); });
}

int ioctl(int fd, unsigned long request, ...) {
  va_list ap;
  va_start(ap, request);
  void* arg = va_arg(ap, void*);
  va_end(ap);
  return KeepErrno([&] {
    return Managed(fd) ? san::Ioctl(fd, request, arg) : Real().ioctl(fd, request, arg);
  });
}

}  // extern "C"
