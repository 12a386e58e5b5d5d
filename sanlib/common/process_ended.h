// ProcessEnded: whether the process `pid` has ended (kill(pid, 0) fails with ESRCH). A process of
// another user is alive (EPERM); a zombie not yet reaped is alive too. pid <= 0 names no single
// process: not ended.
#pragma once

#include <errno.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include "sanlib/common/raw_syscall.h"

namespace san {

inline bool ProcessEnded(pid_t pid) {
  return pid > 0 && Syscall(SYS_kill, pid, 0) != 0 && errno == ESRCH;
}

}  // namespace san
