// SocketTable: fd number -> SanSocket, for the sockets sanlib manages.
//
// Lookups are lock-free (the data path does one per call; common/fd_index.h). A socket may be
// published under several numbers (dup). A removed socket is not deleted here: the caller (close)
// decides its fate, under the lifetime lock: a thread that holds sockets across a sleep without a
// call on them in progress (EpollSet::Wait) pins the table, and close() deletes only when no
// pin is held. A thread inside a data call on an fd another thread closes is an application race,
// as with the kernel's fd reuse; it keeps working on the stream, which the close thread frees only
// after its linger.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <functional>
#include <mutex>
#include <new>
#include <shared_mutex>

#include "sanlib/common/fd_index.h"
#include "sanlib/socket/san_socket.h"

namespace san {

class SocketTable {
 public:
  SanSocket* Find(int fd) const { return index_.Find(fd); }
  // False if fd is out of range or already present.
  bool Insert(SanSocket* socket) { return InsertAs(socket->fd, socket); }
  // Publishes `socket` under another fd number too (dup); false as Insert.
  bool InsertAs(int fd, SanSocket* socket) { return index_.Insert(fd, socket); }
  // Unpublishes and returns the socket for fd (nullptr if none).
  SanSocket* Remove(int fd) {
    SanSocket* s = index_.Remove(fd);
    if (s) NoteChange();
    return s;
  }
  // Counts the numbers that left the table and the sockets that settled (connected: their mode
  // decided): a reader that sees the same count as before its last look at some sockets would see
  // them, by number and mode, as it did then (EpollSet::RefreshLocked).
  uint64_t Changes() const { return changes_.load(std::memory_order_acquire); }
  void NoteChange() { changes_.fetch_add(1, std::memory_order_acq_rel); }
  // Some fd number under which `socket` is published, other than `except` (-1 if none).
  int AnotherFdOf(const SanSocket* socket, int except);
  // Calls fn once for every socket, however many numbers it has (under the table mutex: fn must
  // not call back into the table).
  void ForEach(const std::function<void(SanSocket*)>& fn);
  // As ForEach, with a plain function and no std::function between: a fork child's handlers
  // (common/fork_path.h), whose code must lie with theirs.
  void ForEachPlain(void (*fn)(SanSocket*));
  // Calls fn for every (number, socket) pair: a socket with several numbers (dup) once per number
  // (under the table mutex, as ForEach).
  void ForEachNumber(const std::function<void(int, SanSocket*)>& fn);

  // Sockets are deleted only under the exclusive lifetime lock; a shared pin keeps every socket
  // found meanwhile alive.
  std::shared_lock<std::shared_mutex> Pin() {
    return std::shared_lock<std::shared_mutex>(lifetime_);
  }
  std::unique_lock<std::shared_mutex> LockLifetime() {
    return std::unique_lock<std::shared_mutex>(lifetime_);
  }

  // pthread_atfork: no lock is held across fork. `visit` sees every socket first, none of them
  // closing meanwhile (late_fork.h).
  void BeforeFork(const std::function<void(SanSocket*)>& visit) {
    lifetime_.lock();
    ForEach(visit);
    index_.mutex().lock();
  }
  void AfterForkParent() {
    index_.mutex().unlock();
    lifetime_.unlock();
  }
  // The child's only thread has another TID than the one that write-locked lifetime_, and glibc's
  // rwlock unlock tells a writer by its TID: unlocking would be taken as a reader's unlock and
  // leave the lock held. A fresh lock is what the child needs anyway (no other thread exists).
  // A child no fork handler ran in (Runtime::AdoptMissedFork): the locks in the state
  // BeforeFork leaves them, whatever another thread of the parent held at the clone.
  void LockAfterMissedFork() {
    new (&index_.mutex()) std::mutex();
    index_.mutex().lock();
  }
  void AfterForkChild() {
    index_.mutex().unlock();
    new (&lifetime_) std::shared_mutex();
  }

 private:
  // The locks a close takes side by side, before the index's 8 KiB array of pages: a close in a
  // forking server's parent (or its child) writes each page they lie on, which the fork has just
  // made copy-on-write (a page fault apiece).
  std::shared_mutex lifetime_;
  std::atomic<uint64_t> changes_{0};
  FdIndex<SanSocket> index_;
};

}  // namespace san
