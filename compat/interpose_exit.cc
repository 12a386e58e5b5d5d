// Interposed _exit() and _Exit(): a process that ends this way runs no atexit handler, so the
// runtime's exit handler (socket/runtime.h) never wrote its SAN_REPORT line -- every vsftpd
// session ends so, and its connections were missing from the report. Here the line is written
// (Runtime::AtQuickExit: nothing that takes a lock, nothing in a vfork child), then the process
// ends as _exit ends it. glibc's exit() reaches its own _exit internally, not through here: a
// process that calls exit() writes its line once, from the atexit handler.
#include <sys/syscall.h>
#include <unistd.h>

#include "sanlib/common/fork_path.h"
#include "sanlib/common/raw_syscall.h"
#include "sanlib/socket/runtime.h"

namespace {

[[noreturn]] SAN_FORK_PATH void QuickExit(int status) {
  san::Runtime::AtQuickExit();
  // sanlib's own trap (common/raw_syscall.h): a fork child that ends here runs no libc code.
  for (;;) san::Syscall(SYS_exit_group, status);
}

}  // namespace

extern "C" {

SAN_FORK_PATH void _exit(int status) { QuickExit(status); }
SAN_FORK_PATH void _Exit(int status) { QuickExit(status); }

}  // extern "C"
