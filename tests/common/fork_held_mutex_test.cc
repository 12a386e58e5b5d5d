#include "sanlib/common/fork_held_mutex.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace san {
namespace {

// The mutexes live as long as the process, as HoldAcrossForks asks.
ForkHeldMutex& Registered() {
  static ForkHeldMutex* const m = [] {
    auto* made = new ForkHeldMutex;
    made->HoldAcrossForks();
    return made;
  }();
  return *m;
}

constexpr int kNotAlone = 77;

int ExitCodeOf(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

TEST(ForkHeldMutex, AForkWaitsForAnotherThreadToLeaveItAndTheChildFindsItFree) {
  ForkHeldMutex& m = Registered();
  std::atomic<bool> held{false};
  std::thread holder([&] {
    std::lock_guard<ForkHeldMutex> lock(m);
    held.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  });
  while (!held.load()) std::this_thread::yield();
  const pid_t child = fork();  // another thread is inside: a plain mutex would be copied held
  // A raw exit: ThreadSanitizer's end-of-process check would report the parent's thread, copied
  // running into this child, as leaked.
  if (child == 0) ::syscall(SYS_exit_group, m.try_lock() ? 0 : 1);
  holder.join();
  ASSERT_GT(child, 0);
  EXPECT_EQ(ExitCodeOf(child), 0) << "the child inherited the mutex locked";
  EXPECT_TRUE(m.try_lock()) << "the parent's handler left it locked";
  m.unlock();
}

TEST(ForkHeldMutex, AProcessThatNeverRanASecondThreadTakesNoLockAcrossFork) {
  // glibc does not reset OnlyThreadEver() in a fork child: ctest runs each test in a process of
  // its own, a run of the whole binary may have started threads in the tests before this one.
  if (!OnlyThreadEver()) GTEST_SKIP() << "a thread ran earlier in this process";
  ForkHeldMutex& m = Registered();
  const pid_t child = fork();
  if (child == 0) {
    // ThreadSanitizer clears glibc's flag in a fork child: then the child is not what this case
    // is about, and the handler rightly takes the lock.
    if (!OnlyThreadEver()) _exit(kNotAlone);
    alarm(5);  // a handler that took the lock would wait on this thread forever
    m.lock();  // held by the only thread across its own fork: fine, nobody else can want it
    const pid_t grandchild = fork();
    if (grandchild == 0) _exit(m.try_lock() ? 3 : 0);  // the copy is held, as the parent's is
    const int code = ExitCodeOf(grandchild);
    m.unlock();
    _exit(code);
  }
  ASSERT_GT(child, 0);
  const int code = ExitCodeOf(child);
  if (code == kNotAlone) GTEST_SKIP() << "a fork child here is not single-threaded for glibc";
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace san
