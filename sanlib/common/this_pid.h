// ThisPid: the calling process's pid without a syscall (glibc no longer caches getpid()), for the
// hot paths that ask it several times per call (the sleep protocol's waiter slots, a thread's wake
// fd, single-copy window ownership) and for telling, at each socket call, whether this process is
// a child that no atfork handler told about (a raw clone(): Runtime::CheckMissedFork).
//
// The cached pid lives in a page the kernel zeroes in every child that does not share our memory
// (MADV_WIPEONFORK, Linux 4.14): fork() and raw clone() children alike ask the kernel once. A
// vfork child shares the page and sees its parent's pid here: code that must tell a vfork child
// from its parent (exec) asks the kernel itself. Where the advice is refused, every call asks the
// kernel.
// Thread-safety: thread-safe (an atomic).
#pragma once

#include <sys/types.h>

namespace san {

pid_t ThisPid();
// For a fork child's handler, which knows the page was wiped: asks the kernel and stores the pid
// without reading the page first (a read maps the zero page and the write then copies it: two
// page faults in every child instead of one).
pid_t RefreshThisPid();
// The kernel's answer every time, never the cache: what tells a vfork child (which shares the
// cached page) from its parent.
pid_t KernelPid();

}  // namespace san
