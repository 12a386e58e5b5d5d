// KeepErrno: the errno rule of every interposed call. A call that succeeds leaves errno as it
// found it, as the kernel does, whatever sanlib's own steps on the way did to it (a probe that
// failed, a kernel call retried, a registration looked up that was not there); a call that fails
// leaves its own error. Programs read errno after calls that succeeded (gRPC 1.51 does after a
// nonblocking connect() and epoll_ctl()), so a stray value is a bug, not noise.
// Thread-safety: errno is per thread; so is this.
#pragma once

#include <errno.h>

namespace san::compat {

// Runs `body` (returning an int or ssize_t, negative on failure) under the rule above.
template <typename Body>
inline auto KeepErrno(Body body) {
  const int saved = errno;
  auto result = body();
  if (result >= 0) errno = saved;
  return result;
}

}  // namespace san::compat
