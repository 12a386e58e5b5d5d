// FdIndex<T>: fd number -> T*, with lock-free lookups (one per interposed call on the data path).
//
// A two-level array of atomic pointers indexed by fd: second-level pages are allocated on first
// use and never freed, so Find never sees freed memory of the index itself (what a found T* points
// to is the caller's business). Insert/Remove take a mutex. Covers fds 0 .. 2^20-1 (the usual
// RLIMIT_NOFILE hard cap); beyond that Insert fails and Find returns nullptr.
// Thread-safety: all methods are thread-safe. Lock() exposes the writers' mutex for fork hooks.
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>

#include "sanlib/common/fork_held_mutex.h"

namespace san {

template <typename T>
class FdIndex {
 public:
  static constexpr int kPageBits = 10;
  static constexpr int kPages = 1024;
  static constexpr int kLimit = kPages << kPageBits;

  T* Find(int fd) const {
    if (fd < 0 || fd >= kLimit) return nullptr;
    Page* page = pages_[fd >> kPageBits].load(std::memory_order_acquire);
    return page ? page->slots[fd & kMask].load(std::memory_order_acquire) : nullptr;
  }
  // False if fd is out of range or already holds a value.
  bool Insert(int fd, T* value) {
    if (fd < 0 || fd >= kLimit) return false;
    std::lock_guard<std::mutex> lock(mu_);
    Page* page = pages_[fd >> kPageBits].load(std::memory_order_acquire);
    if (!page) {
      page = new Page();
      pages_[fd >> kPageBits].store(page, std::memory_order_release);
    }
    auto& slot = page->slots[fd & kMask];
    if (slot.load(std::memory_order_relaxed)) return false;
    slot.store(value, std::memory_order_release);
    ++size_;
    return true;
  }
  // Unpublishes and returns the value for fd (nullptr if none).
  T* Remove(int fd) {
    if (fd < 0 || fd >= kLimit) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    Page* page = pages_[fd >> kPageBits].load(std::memory_order_acquire);
    T* was = page ? page->slots[fd & kMask].exchange(nullptr, std::memory_order_acq_rel) : nullptr;
    if (was) --size_;
    return was;
  }
  // Calls fn(fd, value) for every entry, under the writers' mutex (fn must not Insert/Remove, nor
  // start a thread). A process in which no second thread ever ran takes no mutex: nobody else
  // could hold it, and the fork handlers run these (socket/runtime.cc), where the mutex's write
  // would fault on a page the last fork made copy-on-write, in the parent and in the child.
  // Stops at the last entry: a fork child runs several of these, and a process holding one
  // listener should not scan a thousand empty slots each time.
  template <typename Fn>
  void ForEach(Fn&& fn) {
    std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
    if (!OnlyThreadEver()) lock.lock();
    size_t left = size_;
    for (int p = 0; p < kPages && left > 0; ++p) {
      Page* page = pages_[p].load(std::memory_order_acquire);
      if (!page) continue;
      for (int i = 0; i <= kMask && left > 0; ++i) {
        if (T* v = page->slots[i].load(std::memory_order_acquire)) {
          --left;
          fn((p << kPageBits) | i, v);
        }
      }
    }
  }
  std::mutex& mutex() { return mu_; }

 private:
  static constexpr int kMask = (1 << kPageBits) - 1;
  struct Page {
    std::atomic<T*> slots[1 << kPageBits] = {};
  };
  std::mutex mu_;
  size_t size_ = 0;  // entries (mu_)
  std::atomic<Page*> pages_[kPages] = {};
};

}  // namespace san
