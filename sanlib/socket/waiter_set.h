// WaiterSet: the threads of this process asleep on one socket, each with its own eventfd, so that
// a thread that made progress for them (reaped data or credits the doorbell will not ring for
// again) wakes every one of them.
//
// Why one eventfd per thread, not one per socket: with a shared eventfd, the first woken thread
// reads it back to zero, and a second sleeper whose poll re-evaluates after that goes back to
// sleep -- a lost wake-up with three threads on one socket (gRPC's pollers), stalling a stream.
// Each thread reads only its own eventfd (ThisThreadWakeFd), so no wake-up is taken by another.
//
// Entries carry the pid that registered them: a fork child's copy of the set names its parent's
// threads; Wake skips such entries and Add reuses their slots.
// Thread-safety: lock-free; any thread may Add/Remove its own entries and Wake.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "sanlib/common/this_pid.h"

namespace san {

class WaiterSet {
 public:
  static constexpr int kSlots = 32;

  WaiterSet() {
    for (std::atomic<uint64_t>& s : slots_) s.store(kEmpty, std::memory_order_relaxed);
  }

  // Registers `wake_fd` for this process; the slot to Remove later, or -1 if all are taken (the
  // caller then sleeps in short slices instead of relying on a wake-up).
  int Add(int wake_fd) {
    const uint64_t mine = Pack(wake_fd);
    const uint32_t pid = static_cast<uint32_t>(ThisPid());
    for (int i = 0; i < kSlots; ++i) {
      uint64_t seen = slots_[i].load(std::memory_order_relaxed);
      if (seen != kEmpty && PidOf(seen) == pid) continue;
      if (slots_[i].compare_exchange_strong(seen, mine, std::memory_order_acq_rel)) return i;
    }
    return -1;
  }
  // Ends the registration Add(wake_fd) returned `slot` for (nothing if the slot holds another).
  void Remove(int slot, int wake_fd) {
    if (slot < 0 || slot >= kSlots) return;
    uint64_t mine = Pack(wake_fd);
    slots_[slot].compare_exchange_strong(mine, kEmpty, std::memory_order_acq_rel);
  }
  // Rings every sleeper of this process.
  void Wake() {
    const uint32_t pid = static_cast<uint32_t>(ThisPid());
    for (std::atomic<uint64_t>& s : slots_) {
      const uint64_t v = s.load(std::memory_order_acquire);
      if (v != kEmpty && PidOf(v) == pid) eventfd_write(static_cast<int>(v & 0xffffffffu), 1);
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t Pack(int fd) {
    return (uint64_t{static_cast<uint32_t>(ThisPid())} << 32) | static_cast<uint32_t>(fd);
  }
  static uint32_t PidOf(uint64_t v) { return static_cast<uint32_t>(v >> 32); }

  std::atomic<uint64_t> slots_[kSlots];
};

// This thread's wake-up eventfd (nonblocking, close-on-exec, in sanlib's high fd range), made on
// first use and again in a fork child (the parent's would be shared with it); closed when the
// thread exits. -1 if none could be made.
int ThisThreadWakeFd();

}  // namespace san
