#include "sanlib/common/fork_held_mutex.h"

#include <pthread.h>

#include <atomic>
#include <cstdlib>

#include "sanlib/common/fork_path.h"

namespace san {
namespace {

// The registered mutexes, in registration order. A slot is filled before the count covers it,
// so the handlers (which read the count once) never see an empty one.
std::atomic<ForkHeldMutex*> held[8];
std::atomic<int> held_count{0};
std::once_flag handlers_registered;

}  // namespace

void ForkHeldMutex::HoldAcrossForks() {
  static_assert(kMaxHeld == sizeof held / sizeof held[0]);
  static std::mutex registering;
  std::lock_guard<std::mutex> lock(registering);
  const int n = held_count.load(std::memory_order_relaxed);
  if (n == kMaxHeld) abort();
  held[n].store(this, std::memory_order_relaxed);
  held_count.store(n + 1, std::memory_order_release);
  std::call_once(handlers_registered, [] { pthread_atfork(&BeforeFork, &AfterFork, &AfterFork); });
}

void ForkHeldMutex::BeforeFork() {
  const bool alone = OnlyThreadEver();
  const int n = held_count.load(std::memory_order_acquire);
  for (int i = n - 1; i >= 0; --i) {  // the reverse of AfterFork's order
    ForkHeldMutex* m = held[i].load(std::memory_order_relaxed);
    if (m->held_for_fork_ != !alone) m->held_for_fork_ = !alone;  // no write when alone again
    if (!alone) m->mu_.lock();
  }
}

SAN_FORK_PATH void ForkHeldMutex::AfterFork() {
  const int n = held_count.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    ForkHeldMutex* m = held[i].load(std::memory_order_relaxed);
    if (m->held_for_fork_) m->mu_.unlock();
  }
}

}  // namespace san
