// ThisPid: the calling process's pid without a syscall (glibc no longer caches getpid()), for the
// hot paths that ask it several times per call (the sleep protocol's waiter slots, a thread's wake
// fd, single-copy window ownership).
//
// Cached per process; a pthread_atfork child handler clears it, so a fork child asks the kernel
// once. A vfork child runs no atfork handlers and sees its parent's pid here: code that must tell
// a vfork child from its parent (exec) asks the kernel itself.
// Thread-safety: thread-safe (an atomic).
#pragma once

#include <sys/types.h>

namespace san {

pid_t ThisPid();
// Forgets the cached pid: for a child that no atfork handler told (a raw clone(), Runtime).
void ForgetPid();

}  // namespace san
