// SocketTable: fd number -> SanSocket, for the sockets sanlib manages.
//
// Lookups are lock-free (the data path does one per call): a two-level array of atomic pointers
// indexed by fd, second-level pages allocated on first use and never freed. Insert/Remove are rare
// and take a mutex. A removed socket is not deleted here: the caller (close) decides its fate, and
// a thread still inside a call on that fd (an application race, as with the kernel's fd reuse) keeps
// working on the object, which the close thread frees only after its linger.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>

#include "socket/san_socket.h"

namespace san {

class SocketTable {
 public:
  static constexpr int kPageBits = 10;
  static constexpr int kPages = 1024;  // fds 0 .. 2^20-1

  SanSocket* Find(int fd) const {
    if (fd < 0 || fd >= (kPages << kPageBits)) return nullptr;
    Page* page = pages_[fd >> kPageBits].load(std::memory_order_acquire);
    return page ? page->slots[fd & ((1 << kPageBits) - 1)].load(std::memory_order_acquire) : nullptr;
  }
  // False if fd is out of range or already present.
  bool Insert(SanSocket* socket);
  // Unpublishes and returns the socket for fd (nullptr if none).
  SanSocket* Remove(int fd);
  // Calls fn for every socket (under the table mutex: fn must not call back into the table).
  void ForEach(const std::function<void(SanSocket*)>& fn);
  // pthread_atfork: the mutex is not held across fork.
  void BeforeFork() { mu_.lock(); }
  void AfterFork() { mu_.unlock(); }

 private:
  struct Page {
    std::atomic<SanSocket*> slots[1 << kPageBits] = {};
  };
  std::mutex mu_;
  std::atomic<Page*> pages_[kPages] = {};
};

}  // namespace san
