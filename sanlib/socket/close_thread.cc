#include "sanlib/socket/close_thread.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>

#include "sanlib/common/clock.h"
#include "sanlib/common/config.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/log.h"
#include "sanlib/common/own_thread.h"
#include "sanlib/socket/socket_ops.h"
#include "sanlib/socket/tcp_move.h"

namespace san {

CloseThread::~CloseThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  pthread_join(thread_, nullptr);
}

void CloseThread::EnsureThreadLocked() {
  if (running_) return;
  timer_us_ = std::max<uint32_t>(Config::Get().combine_timer_us, 10);
  if (const int rc = StartOwnThread(&thread_, &CloseThread::Main, this); rc != 0) {
    SAN_LOG_ERROR("close thread: pthread_create: %d", rc);
    return;
  }
  running_ = true;
}

void CloseThread::Adopt(std::unique_ptr<proto::Stream> stream, UniqueFd kernel_fd,
                        uint32_t linger_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  timed_.erase(std::remove(timed_.begin(), timed_.end(), stream.get()), timed_.end());
  EnsureThreadLocked();
  closing_.push_back(
      Closing{std::move(stream), std::move(kernel_fd), NowNs() + uint64_t{linger_ms} * 1000000});
  cv_.notify_all();
}

void CloseThread::ArmTimer(proto::Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(timed_.begin(), timed_.end(), stream) != timed_.end()) return;
  EnsureThreadLocked();
  timed_.push_back(stream);
  cv_.notify_all();
}

void CloseThread::WatchRelay(proto::Stream* stream, UniqueFd kernel_fd) {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureThreadLocked();
  relaying_.push_back(Relaying{stream, std::move(kernel_fd)});
  cv_.notify_one();
}

void CloseThread::Forget(proto::Stream* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  timed_.erase(std::remove(timed_.begin(), timed_.end(), stream), timed_.end());
  relaying_.erase(std::remove_if(relaying_.begin(), relaying_.end(),
                                 [&](const Relaying& r) { return r.stream == stream; }),
                  relaying_.end());
}

size_t CloseThread::closing_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return closing_.size();
}

void CloseThread::AfterForkChild() {
  // The parent's thread owns the closing connections; the child must not act on them (their
  // streams are the parent's business): it drops its copies of their fds and mappings.
  running_ = false;
  for (auto& c : closing_) {
    proto::Stream::ForgetForkCopy(std::move(c.stream));
    c.kernel_fd.reset();
  }
  closing_.clear();
  timed_.clear();
  relaying_.clear();  // the parent's thread drives them (the state is shared)
  // The parent's thread was (almost always) waiting on cv_: the child's copy still counts that
  // waiter, and the next notify would wait forever for it. Start the child with a fresh one (not
  // destroyed first: destroying a condvar with waiters blocks as well).
  new (&cv_) std::condition_variable();
  mu_.unlock();
}

bool CloseThread::Finish(Closing& c, uint64_t now) {
  const bool done = FinishStep(c, now);
  // A connection that began on kernel TCP (late_upgrade.h): the peer's wake byte may still sit in
  // the kernel socket, and closing a socket with unread bytes resets the peer.
  if (done && c.stream->PeerTcpBytes()) {
    char sink[256];
    while (kernel::recv(c.kernel_fd.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
  }
  return done;
}

bool CloseThread::FinishStep(Closing& c, uint64_t now) {
  proto::Stream& s = *c.stream;
  if (s.Moved()) {
    // The connection went on over TCP (tcp_move.h): what is owed is the relay; then closing our
    // copy of the kernel socket is the close, as for any TCP connection.
    KernelRelayIo io(c.kernel_fd.get());
    Result<bool> relayed = s.Relay(io);
    if (relayed.ok() || !relayed.status().would_block()) return true;
    return now >= c.deadline_ns;
  }
  s.Progress();
  if (s.Available() > 0) {
    s.Abort();  // data for a socket nobody will read: reset, as the kernel does
    return true;
  }
  if (s.Finished()) return true;
  proto::Readiness r = s.GetReadiness();
  if (r.error) return true;
  if (s.endpoint().broken() || PeekKernelSide(c.kernel_fd.get()) == KernelSide::kGone) return true;
  if (now >= c.deadline_ns) {
    SAN_LOG_INFO("close: linger expired, resetting the connection");
    s.Abort();
    return true;
  }
  return false;
}

size_t CloseThread::Drain(uint32_t max_wait_ms) {
  const uint64_t deadline = NowNs() + uint64_t{max_wait_ms} * 1000000;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (proto::Stream* s : timed_) s->Flush();
      size_t unfinished = 0;
      for (auto& c : closing_) {
        // Not the close phase: it leaves kOpen when the FIN is requested, not when it is posted,
        // and a FIN behind combined bytes waits for a credit.
        if (!c.stream->NothingLeftToPost()) ++unfinished;
      }
      if (unfinished == 0 || NowNs() >= deadline) return unfinished;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void* CloseThread::Main(void* self) {
  static_cast<CloseThread*>(self)->Run();
  return nullptr;
}

void CloseThread::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (closing_.empty() && timed_.empty() && relaying_.empty()) {
      cv_.wait(lock);
      continue;
    }
    // Sleep first: a freshly armed timer is not due yet. Closing connections make progress only
    // here, so they are looked at often, but not hot.
    cv_.wait_for(lock, std::chrono::microseconds(timed_.empty() ? 200 : timer_us_));
    if (stopping_) break;
    const uint64_t now = NowNs();
    for (auto it = timed_.begin(); it != timed_.end();) {
      // Disarm before looking, so a Send that buffers after this point re-arms the timer.
      (*it)->DisarmTimer();
      if ((*it)->FlushIfDue(now) && (*it)->TryArmTimer()) {
        ++it;
      } else {
        it = timed_.erase(it);
      }
    }
    for (auto it = relaying_.begin(); it != relaying_.end();) {
      KernelRelayIo io(it->kernel_fd.get());
      Result<bool> relayed = it->stream->Relay(io);
      if (relayed.ok() || !relayed.status().would_block()) {
        it = relaying_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = closing_.begin(); it != closing_.end();) {
      if (Finish(*it, now)) {
        it = closing_.erase(it);  // releases the stream and the kernel socket
      } else {
        ++it;
      }
    }
  }
}

}  // namespace san
