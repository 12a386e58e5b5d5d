// CloseThread: finishes connections the application has closed (SOVIA 3.3), and fires the
// small-message combining timer for open ones.
//
// After the application's last close() the stream has sent (or will send, once a credit returns)
// its FIN; nobody calls into it any more, so this thread drives it: it answers the peer's FIN with
// FINACK, resets the connection if data arrives for the closed socket (as the kernel sends RST),
// and releases the stream and the kernel socket once our FIN is acknowledged, the peer is gone
// (kernel socket EOF/reset, or the provider says broken), or the linger time (SAN_LINGER_MS) runs
// out -- close() itself never waits.
//
// The timer: Send() that leaves bytes in a combine buffer registers the stream here; the thread
// flushes it once SAN_COMBINE_US passes with nothing else having flushed it.
//
// The relay: an open connection whose peer moved it to kernel TCP (tcp_move.h) owes the peer its
// returned bytes; the thread drives that relay too, so it completes while the application does
// not touch the socket. The thread sleeps when it has none of these jobs (no periodic wake-ups on
// an idle process).
//
// Thread-safety: all public methods are thread-safe. Forget() must be called before a registered
// open stream is destroyed or handed over with Adopt().
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "sanlib/common/unique_fd.h"
#include "sanlib/proto/stream.h"

namespace san {

class CloseThread {
 public:
  ~CloseThread();
  // Takes over a closed connection: its stream and a private duplicate of its kernel socket.
  void Adopt(std::unique_ptr<proto::Stream> stream, UniqueFd kernel_fd, uint32_t linger_ms);
  // The stream has bytes waiting in its combine buffer: flush them if nothing else does in time.
  void ArmTimer(proto::Stream* stream);
  // The open stream's peer moved the connection to TCP and its relay waits for the kernel socket
  // (`kernel_fd`, a private duplicate): drive it until it is done.
  void WatchRelay(proto::Stream* stream, UniqueFd kernel_fd);
  // The open stream is going away: stop timing it and driving its relay.
  void Forget(proto::Stream* stream);
  // Waits (bounded by each connection's linger) until every adopted connection has at least
  // posted its FIN; used at exit so no data is left unsent. Returns how many were abandoned.
  size_t Drain(uint32_t max_wait_ms);
  size_t closing_count();

  void BeforeFork() { mu_.lock(); }
  void AfterForkParent() { mu_.unlock(); }
  void AfterForkChild();
  // A child no fork handler ran in (Runtime::AdoptMissedFork): mu_ as BeforeFork leaves it.
  void LockAfterMissedFork() {
    new (&mu_) std::mutex();
    mu_.lock();
  }

 private:
  struct Closing {
    std::unique_ptr<proto::Stream> stream;
    UniqueFd kernel_fd;
    uint64_t deadline_ns;
  };
  struct Relaying {
    proto::Stream* stream;
    UniqueFd kernel_fd;
  };
  static void* Main(void* self);
  void Run();
  // One pass over the closing connections; returns true for each that may be released.
  bool Finish(Closing& c, uint64_t now);
  bool FinishStep(Closing& c, uint64_t now);
  void EnsureThreadLocked();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Closing> closing_;
  std::vector<proto::Stream*> timed_;
  std::vector<Relaying> relaying_;
  pthread_t thread_{};
  bool running_ = false;
  bool stopping_ = false;
  uint32_t timer_us_ = 200;
};

}  // namespace san
