#include "drpc/node/task_queue.h"

#include <chrono>

namespace san::drpc {

TaskQueue::TaskQueue(size_t slots) {
  if (slots == 0) slots = 1;
  for (size_t i = 0; i < slots; ++i) workers_.emplace_back([this] { Worker(); });
}

TaskQueue::~TaskQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [id, t] : tasks_) t->cancel_requested = true;
  }
  work_cv_.notify_all();
  done_cv_.notify_all();
  for (std::thread& w : workers_) w.join();
}

Result<uint64_t> TaskQueue::Submit(ExecSpec spec) {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.size() >= kMaxPending) return Status(EAGAIN, "submit: the task queue is full");
  auto t = std::make_shared<Task>();
  t->id = next_id_++;
  t->spec = std::move(spec);
  t->state.id = t->id;
  tasks_[t->id] = t;
  queue_.push_back(t->id);
  work_cv_.notify_one();
  return t->id;
}

void TaskQueue::FinishLocked(uint64_t id) {
  finished_.push_back(id);
  while (finished_.size() > kMaxFinished) {
    tasks_.erase(finished_.front());
    finished_.pop_front();
  }
  done_cv_.notify_all();
}

void TaskQueue::Worker() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const uint64_t id = queue_.front();
    queue_.pop_front();
    std::shared_ptr<Task> t = tasks_[id];
    t->state.phase = TaskPhase::kRunning;
    t->state.started = true;
    ++running_;
    done_cv_.notify_all();
    lock.unlock();

    std::string output;
    auto sink = [&](OutputStream, const char* data, size_t len) {
      output.append(data, len);
      if (output.size() > 2 * kOutputKeep) output.erase(0, output.size() - kOutputKeep);
      std::lock_guard<std::mutex> l(mu_);
      t->state.output =
          output.size() > kOutputKeep ? output.substr(output.size() - kOutputKeep) : output;
      return true;
    };
    auto cancelled = [&] {
      std::lock_guard<std::mutex> l(mu_);
      return t->cancel_requested;
    };
    Result<ExecOutcome> r = RunCommand(t->spec, sink, cancelled);

    lock.lock();
    --running_;
    if (output.size() > kOutputKeep) output.erase(0, output.size() - kOutputKeep);
    t->state.output = std::move(output);
    if (!r.ok()) {
      t->state.error = r.status().ToString();
      t->state.started = false;  // it never ran: no outcome to report
      t->state.phase = TaskPhase::kDone;
    } else {
      t->state.outcome = r.value();
      t->state.phase = r->cancelled ? TaskPhase::kCancelled : TaskPhase::kDone;
    }
    FinishLocked(id);
  }
}

Result<TaskSnapshot> TaskQueue::Wait(uint64_t id, uint32_t wait_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return Status(ENOENT, "wait: no such task");
  std::shared_ptr<Task> t = it->second;
  done_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [&] {
    return stopping_ || t->state.phase == TaskPhase::kDone ||
           t->state.phase == TaskPhase::kCancelled;
  });
  return t->state;
}

Result<TaskSnapshot> TaskQueue::Cancel(uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end()) return Status(ENOENT, "cancel: no such task");
  std::shared_ptr<Task> t = it->second;
  if (t->state.phase == TaskPhase::kQueued) {
    for (auto q = queue_.begin(); q != queue_.end(); ++q) {
      if (*q == id) {
        queue_.erase(q);
        break;
      }
    }
    t->state.phase = TaskPhase::kCancelled;
    FinishLocked(id);
  } else if (t->state.phase == TaskPhase::kRunning) {
    t->cancel_requested = true;
    // The worker sees it within RunCommand's 100 ms tick; wait for it so the reply is final.
    done_cv_.wait_for(lock, std::chrono::seconds(5),
                      [&] { return t->state.phase != TaskPhase::kRunning; });
  }
  return t->state;
}

void TaskQueue::Counts(uint32_t* queued, uint32_t* running) const {
  std::lock_guard<std::mutex> lock(mu_);
  *queued = static_cast<uint32_t>(queue_.size());
  *running = running_;
}

}  // namespace san::drpc
