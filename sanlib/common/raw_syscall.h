// san::Syscall: a system call made by sanlib's own trap instruction, as libc's syscall(3) makes it
// (the result, or -1 with errno set), without calling libc's syscall().
//
// Why not libc's: under sanrun the preload library's call to syscall() goes through its PLT, bound
// lazily, and libc's code for it sits in a page of its own. A fork child gets no page tables for
// file mappings and its own copy-on-write GOT, so every child that made sanlib's first system call
// of some kind -- a forking server's child closing its connection, any child's _exit (interposed,
// compat/interpose_exit.cc) -- paid a symbol look-up through every loaded library, a copy-on-write
// fault on the GOT and page faults on libc's code (fork + _exit + wait of a process under sanrun
// took 6 more page faults per child than a plain one, about a quarter more time on this VM:
// docs/compat.md, "What sanrun costs a process"). Now a child runs only sanlib's own code (and
// libc's __errno_location when a call fails). The trap is one function (raw_syscall.cc) called
// directly, not inlined at every use: inlined, it grew the preload library's code by 20 KB, which
// every exec under sanrun maps.
//
// x86-64 and AArch64 trap directly; other architectures call libc's syscall().
// Thread-safety: as the system call. Safe in a vfork child and in a signal handler (no libc state
// but errno).
#pragma once

#include <sys/syscall.h>

#include <type_traits>

namespace san {

// The trap itself, out of line (one copy in the library, a direct call from each use): the
// kernel's result, or -1 with errno.
long Syscall6(long nr, long a, long b, long c, long d, long e, long f);

namespace raw_syscall_detail {

template <typename T>
long Arg(T v) {
  if constexpr (std::is_pointer_v<T> || std::is_null_pointer_v<T>) {
    return reinterpret_cast<long>(v);
  } else {
    return static_cast<long>(v);
  }
}

}  // namespace raw_syscall_detail

// syscall(nr, args...) without libc: the kernel's result, or -1 with errno.
template <typename... Args>
long Syscall(long nr, Args... args) {
  static_assert(sizeof...(Args) <= 6, "a system call takes at most six arguments");
  long a[6] = {raw_syscall_detail::Arg(args)...};
  return Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

}  // namespace san
