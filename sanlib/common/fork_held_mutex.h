// ForkHeldMutex: a mutex that fork() never copies while another thread holds it.
//
// A child inherits every lock in the state its parent's threads left it: one held by a thread
// that does not exist in the child stays held there for good. HoldAcrossForks() registers the
// mutex with pthread_atfork handlers that lock it before a fork and unlock it after, in the
// parent and in the child. A process in which no second thread ever ran (OnlyThreadEver(), read
// in the prepare handler) is not locked: nobody else can be inside, and a lock and an unlock
// after the fork would write the mutex's page in both processes, a copy-on-write fault apiece
// (an accept-then-fork server pays them at every connection). Runtime's own fork handlers make
// the same decision with OnlyThreadEver() (socket/runtime.h fork_alone_).
//
// Thread-safety: a std::mutex (BasicLockable, Lockable). HoldAcrossForks may be called from any
// thread; the mutex must then live as long as the process (the fabric's providers do).
#pragma once

#include <sys/single_threaded.h>

#include <mutex>

namespace san {

// Whether this process never ran a second thread (glibc's __libc_single_threaded). In a fork's
// prepare handler: whether a lock can be held by anyone but the forking thread.
inline bool OnlyThreadEver() { return __libc_single_threaded; }

class ForkHeldMutex {
 public:
  void lock() { mu_.lock(); }
  void unlock() { mu_.unlock(); }
  bool try_lock() { return mu_.try_lock(); }

  // From now on every fork() holds this mutex across itself (at most kMaxHeld in a process;
  // beyond that it aborts: a programming error).
  void HoldAcrossForks();

 private:
  static constexpr int kMaxHeld = 8;
  static void BeforeFork();
  static void AfterFork();

  std::mutex mu_;
  bool held_for_fork_ = false;  // locked by BeforeFork, for AfterFork to unlock
};

}  // namespace san
