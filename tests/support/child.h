// Test support: a forked child running a function of the test (Child), the way such a child
// leaves (ChildExit), and a pipe for small messages between the two (Channel).
//
// Every wait has a deadline. A child arms alarm() first thing, so a hung child dies on its own;
// the parent kills (SIGKILL) and reaps any child it stops waiting for, and the destructor does the
// same for a child nobody waited for. Test-only. Thread-safety: an object is used by one thread.
#pragma once

#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include <functional>

namespace san::testing_support {

// Fork children that leave through exit() (to run sanlib's exit hook) would fail LeakSanitizer's
// end-of-process check for memory they can never free: heap blocks referenced only from the
// stacks of the parent's threads (which do not exist in the child) and the parent's closing
// streams, which the child deliberately releases. Under ASan such children end with _exit() from
// an atexit handler registered before sanlib's (so it runs after sanlib's hook, before LSan's
// check); the parent keeps its full leak check. Call ChildExit(code) instead of exit(code).
// (Inline in the header, like the handler's registration: every test that forks gets it at
// start-up, before sanlib registers its own.)
inline pid_t g_main_pid = 0;
inline int g_child_exit_code = 0;
[[noreturn]] inline void ChildExit(int code) {
  g_child_exit_code = code;
  exit(code);
}
#if defined(__SANITIZE_ADDRESS__)
inline void SkipLeakCheckInChild() {
  if (getpid() != g_main_pid) _exit(g_child_exit_code);
}
inline const bool kChildLeakCheckSkipped = [] {
  g_main_pid = getpid();
  return atexit(&SkipLeakCheckInChild) == 0;
}();
#endif

// A forked child running `body`; its return value is the exit code.
class Child {
 public:
  static constexpr unsigned kAlarmSeconds = 25;

  Child() = default;
  explicit Child(const std::function<int()>& body, unsigned alarm_s = kAlarmSeconds) {
    Start(body, alarm_s);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Kill(); }

  void Start(const std::function<int()>& body, unsigned alarm_s = kAlarmSeconds);
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // Waits up to timeout_ms; returns the raw wait status, or -1 after a timeout (the child is then
  // killed and reaped), -2 if it cannot be waited for.
  int Wait(int timeout_ms);
  // Exit code, or 128 + signal, or -1 on timeout.
  int WaitCode(int timeout_ms) { return Code(Wait(timeout_ms)); }
  static int Code(int status);
  // Without waiting: true if the child has ended (and is reaped: status() says how).
  bool Exited();
  int status() const { return status_; }
  // SIGKILL and reap (nothing if it was reaped already).
  void Kill();

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

// A pipe for passing small fixed-size messages between a parent and its child, with deadlines.
class Channel {
 public:
  Channel();
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  template <typename T>
  bool Put(const T& v) {
    return Write(&v, sizeof v);
  }
  // False on timeout, EOF or error.
  template <typename T>
  bool Get(T* v, int timeout_ms) {
    return Read(v, sizeof(T), timeout_ms);
  }

 private:
  bool Write(const void* data, size_t len);
  bool Read(void* data, size_t len, int timeout_ms);

  int fds_[2];
};

}  // namespace san::testing_support
