#include "sanlib/socket/late_kick.h"

#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/types.h>

#include <atomic>
#include <mutex>

#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/this_pid.h"
#include "sanlib/socket/late_phase.h"

namespace san {
namespace {

struct Kick {
  std::mutex mu;
  std::atomic<int> fd{-1};
  std::atomic<pid_t> pid{0};  // the process that made fd
};
Kick& TheKick() {
  static Kick* kick = new Kick();  // never destroyed (a preloaded library)
  return *kick;
}

// A fork child counts its own sleepers from zero: the parent's are not in it. Installed by the
// first sleeper, which holds no lock of sanlib's (a fork's prepare handlers may take them, and
// pthread_atfork waits for a fork under way).
void ResetCountInForkChildren() {
  static const bool installed =
      pthread_atfork(nullptr, nullptr, [] { late_activity::sleepers.store(0); }) == 0;
  (void)installed;
}

}  // namespace

void WakeLateSleepers() {
  const int fd = TheKick().fd.load(std::memory_order_acquire);
  if (fd >= 0) eventfd_write(fd, 1);
  late_kick::PollSleepers().Wake();
}

namespace late_kick {

int Fd() {
  Kick& k = TheKick();
  const int fd = k.fd.load(std::memory_order_acquire);
  if (fd >= 0 && k.pid == ThisPid()) return fd;
  std::lock_guard<std::mutex> lock(k.mu);
  const pid_t me = ThisPid();
  if (k.fd.load() >= 0 && k.pid == me) return k.fd.load();
  if (k.fd.load() >= 0) kernel::close(k.fd.load());  // the parent's copy (a fork child)
  k.fd.store(-1);
  const int made = PlaceHigh(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  k.pid = me;
  if (made >= 0) k.fd.store(made, std::memory_order_release);
  return made;
}

WaiterSet& PollSleepers() {
  static WaiterSet* sleepers = new WaiterSet();  // never destroyed (a preloaded library)
  return *sleepers;
}

Sleeper::Sleeper() {
  ResetCountInForkChildren();
  late_activity::sleepers.fetch_add(1);
}
Sleeper::~Sleeper() { late_activity::sleepers.fetch_sub(1); }

}  // namespace late_kick
}  // namespace san
