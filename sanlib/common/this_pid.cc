#include "common/this_pid.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

namespace san {
namespace {

std::atomic<pid_t> g_pid{0};

}  // namespace

pid_t ThisPid() {
  pid_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    static const int registered =
        pthread_atfork(nullptr, nullptr, [] { g_pid.store(0, std::memory_order_relaxed); });
    (void)registered;
    pid = getpid();
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

void ForgetPid() { g_pid.store(0, std::memory_order_relaxed); }

}  // namespace san
