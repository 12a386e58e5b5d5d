// UniqueFd: owns one file descriptor and closes it exactly once (RAII for every fd in sanlib).
//
// Thread-safety: like a unique_ptr; one owner. release() hands the fd out without closing it.
// close() goes straight to the kernel (syscall), never through an interposed close() -- except
// under ThreadSanitizer, which tracks fds through the libc calls it intercepts: a close it cannot
// see makes the fd number's reuse look like a data race (KernelClose below). A number from 1,024 up
// is first dropped from PlaceLow's record (fd_placement.h).
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

#include "sanlib/common/raw_syscall.h"

#if defined(__SANITIZE_THREAD__)
#define SAN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SAN_TSAN 1
#endif
#endif

namespace san {

void ForgetPlacedLow(int fd);  // fd_placement.h

inline int KernelClose(int fd) {
  if (fd >= 1024) ForgetPlacedLow(fd);  // a number PlaceLow may have placed
#ifdef SAN_TSAN
  return ::close(fd);
#else
  return static_cast<int>(Syscall(SYS_close, fd));
#endif
}

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) KernelClose(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace san
