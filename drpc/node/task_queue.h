// TaskQueue: a node's small task queue (Submit / Wait / Cancel), for cluster task scheduling.
//
// Submitted commands run in order on `slots` worker threads through RunCommand (exec_runner.h).
// Each task keeps the last 1 MiB of its output (stdout and stderr interleaved) and its outcome.
// At most kMaxPending tasks wait; finished tasks are kept until kMaxFinished newer ones finished.
// Cancel of a queued task removes it; of a running one kills its process group.
// Thread-safety: every method may be called from any thread. The destructor cancels what is
// running, drops what is queued, and joins the workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "drpc/node/exec_runner.h"
#include "sanlib/common/status.h"

namespace san::drpc {

enum class TaskPhase { kQueued, kRunning, kDone, kCancelled };

struct TaskSnapshot {
  uint64_t id = 0;
  TaskPhase phase = TaskPhase::kQueued;
  bool started = false;
  ExecOutcome outcome;  // meaningful once started and no longer running
  std::string error;    // the spawn failed: why (phase kDone)
  std::string output;   // the last kOutputKeep bytes
};

class TaskQueue {
 public:
  static constexpr size_t kMaxPending = 1024;
  static constexpr size_t kMaxFinished = 1024;
  static constexpr size_t kOutputKeep = 1024 * 1024;

  explicit TaskQueue(size_t slots);
  ~TaskQueue();

  // EAGAIN when kMaxPending tasks are already waiting.
  Result<uint64_t> Submit(ExecSpec spec);
  // Blocks until the task finished or wait_ms passed; ENOENT for an unknown id.
  Result<TaskSnapshot> Wait(uint64_t id, uint32_t wait_ms);
  Result<TaskSnapshot> Cancel(uint64_t id);
  void Counts(uint32_t* queued, uint32_t* running) const;

 private:
  struct Task {
    uint64_t id = 0;
    ExecSpec spec;
    TaskSnapshot state;
    bool cancel_requested = false;
  };
  void Worker();
  void FinishLocked(uint64_t id);

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a task was queued, or stopping
  std::condition_variable done_cv_;  // a task changed phase
  std::map<uint64_t, std::shared_ptr<Task>> tasks_;
  std::deque<uint64_t> queue_;
  std::deque<uint64_t> finished_;
  uint64_t next_id_ = 1;
  uint32_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace san::drpc
