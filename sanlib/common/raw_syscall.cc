#include "sanlib/common/raw_syscall.h"

#include <errno.h>
#include <unistd.h>

#include "sanlib/common/fork_path.h"

namespace san {
namespace {

// The kernel's own result: >= 0, or -errno.
long Trap(long nr, long a, long b, long c, long d, long e, long f) {
#if defined(__x86_64__)
  register long r10 asm("r10") = d;
  register long r8 asm("r8") = e;
  register long r9 asm("r9") = f;
  long ret;
  asm volatile("syscall"
               : "=a"(ret)
               : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 asm("x8") = nr;
  register long x0 asm("x0") = a;
  register long x1 asm("x1") = b;
  register long x2 asm("x2") = c;
  register long x3 asm("x3") = d;
  register long x4 asm("x4") = e;
  register long x5 asm("x5") = f;
  asm volatile("svc 0"
               : "+r"(x0)
               : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
               : "memory", "cc");
  return x0;
#else
  const long ret = ::syscall(nr, a, b, c, d, e, f);
  return ret == -1 ? -errno : ret;
#endif
}

}  // namespace

SAN_FORK_PATH long Syscall6(long nr, long a, long b, long c, long d, long e, long f) {
  const long ret = Trap(nr, a, b, c, d, e, f);
  if (ret < 0 && ret > -4096) {
    errno = static_cast<int>(-ret);
    return -1;
  }
  return ret;
}

}  // namespace san
