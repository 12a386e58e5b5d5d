// Link: the state one loopback connection's two endpoints share (in-process only).
//
// Thread-safety: every field is guarded by `mu`; both endpoints and the connecting client's wait
// take it. Ownership: shared (std::shared_ptr) by the two endpoints; whichever dies last frees it.
// Invariants: each FixedQueue's capacity is set once at endpoint creation from its EndpointAttr,
// so the data path never allocates except for held (delayed) messages.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "sanlib/fabric/provider.h"

namespace san::fabric::loopback {

// A bounded FIFO over storage allocated once.
template <typename T>
class FixedQueue {
 public:
  void Init(size_t capacity) {
    slots_.assign(capacity, T{});
    head_ = count_ = 0;
  }
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == slots_.size(); }
  size_t size() const { return count_; }
  T& front() { return slots_[head_]; }
  void push(const T& v) {
    slots_[(head_ + count_) % slots_.size()] = v;
    ++count_;
  }
  void pop() {
    head_ = (head_ + 1) % slots_.size();
    --count_;
  }

 private:
  std::vector<T> slots_;
  size_t head_ = 0;
  size_t count_ = 0;
};

// A message waiting in the network because of a delay fault (a copy: the sender's source may be
// reused as soon as PostSend returns).
struct HeldMessage {
  uint64_t ready_poll;  // deliverable once the receiver's poll count reaches this
  uint64_t ready_ns;    // ... and NowNs() reaches this
  uint32_t imm;
  std::vector<std::byte> data;
};

// One endpoint's queues: what it posted and what completed for it.
struct Half {
  bool present = false;  // the endpoint exists
  bool connected = false;
  bool armed = false;
  int doorbell = -1;  // the endpoint's eventfd (owned by the endpoint)
  uint64_t polls = 0;
  FixedQueue<RecvWork> posted;
  FixedQueue<Completion> recv_done;
  FixedQueue<uint64_t> send_done;
  std::deque<HeldMessage> held;  // messages to this half, not yet delivered
  // Single copy: the window this half exposes, as shm's SideBlock::window ((generation << 2) |
  // state: 0 idle, 1 open, 2 busy, 3 done). Atomic, not under `mu`: the writer copies and a
  // revoker waits without the lock, exactly as the two processes do in shm.
  std::atomic<uint64_t> window{0};
};

struct Link {
  std::mutex mu;
  std::condition_variable verdict_cv;
  Half half[2];      // 0 = client, 1 = server
  int broken = 0;    // 0, or why it broke
  int verdict = -1;  // -1 pending; 0 accepted; an errno when refused or abandoned
};

}  // namespace san::fabric::loopback
