// The node's command runner and task queue, with real processes (/bin/sh), no gRPC.
#include <gtest/gtest.h>

#include <signal.h>
#include <atomic>
#include <chrono>

#include "drpc/node/exec_runner.h"
#include "drpc/node/task_queue.h"

namespace san::drpc {
namespace {

struct Collected {
  std::string out, err;
};

Result<ExecOutcome> RunSh(const std::string& script, Collected* c, uint32_t timeout_ms = 10000,
                          std::map<std::string, std::string> env = {}, std::string cwd = "") {
  ExecSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.env = std::move(env);
  spec.cwd = std::move(cwd);
  spec.timeout_ms = timeout_ms;
  return RunCommand(
      spec,
      [&](OutputStream s, const char* d, size_t n) {
        (s == OutputStream::kStdout ? c->out : c->err).append(d, n);
        return true;
      },
      nullptr);
}

TEST(DrpcExecRunner, OutputExitEnvCwd) {
  Collected c;
  Result<ExecOutcome> r = RunSh("echo out; echo err >&2; echo $DRPC_X; pwd; exit 3", &c, 10000,
                                {{"DRPC_X", "from-request"}}, "/tmp");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->signal, 0);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(c.out, "out\nfrom-request\n/tmp\n");
  EXPECT_EQ(c.err, "err\n");
  EXPECT_EQ(r->output_bytes, c.out.size() + c.err.size());
}

TEST(DrpcExecRunner, LargeOutputArrivesWhole) {
  Collected c;
  // 8 MiB through the pipe, far beyond its buffer: the runner must keep reading.
  Result<ExecOutcome> r = RunSh("head -c 8388608 /dev/zero | tr '\\0' 'z'", &c, 30000);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(c.out.size(), 8388608u);
  EXPECT_EQ(c.out.find_first_not_of('z'), std::string::npos);
}

TEST(DrpcExecRunner, TimeoutKillsTheWholeGroup) {
  Collected c;
  const auto t0 = std::chrono::steady_clock::now();
  // A background grandchild holds the pipe too: it must not keep the call alive.
  Result<ExecOutcome> r = RunSh("sleep 30 & echo started; sleep 30", &c, 300);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_EQ(c.out, "started\n");
  EXPECT_LT(s, 5.0);
}

TEST(DrpcExecRunner, ExitedCommandWithBackgroundChildReturnsPromptly) {
  Collected c;
  const auto t0 = std::chrono::steady_clock::now();
  Result<ExecOutcome> r = RunSh("sleep 30 & echo done", &c, 60000);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(c.out, "done\n");
  EXPECT_LT(s, 5.0);
}

TEST(DrpcExecRunner, SinkRefusalAndCancelStopIt) {
  ExecSpec spec;
  spec.argv = {"/bin/sh", "-c", "while :; do echo y; done"};
  spec.timeout_ms = 20000;
  int calls = 0;
  Result<ExecOutcome> r = RunCommand(
      spec, [&](OutputStream, const char*, size_t) { return ++calls < 3; }, nullptr);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cancelled);
  EXPECT_EQ(calls, 3);
  std::atomic<int> ticks{0};
  spec.argv = {"/bin/sleep", "30"};
  r = RunCommand(
      spec, [](OutputStream, const char*, size_t) { return true; }, [&] { return ++ticks > 2; });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->cancelled);
}

TEST(DrpcExecRunner, SpawnErrors) {
  ExecSpec spec;
  spec.argv = {"/nonexistent/drpc-no-such-command"};
  Result<ExecOutcome> r = RunCommand(
      spec, [](OutputStream, const char*, size_t) { return true; }, nullptr);
  EXPECT_EQ(r.status().code(), ENOENT);
  spec.argv = {};
  EXPECT_EQ(RunCommand(spec, nullptr, nullptr).status().code(), EINVAL);
  spec.argv = {"/bin/true"};
  spec.cwd = "/nonexistent-dir-for-drpc";
  EXPECT_FALSE(RunCommand(
                   spec, [](OutputStream, const char*, size_t) { return true; }, nullptr)
                   .ok());
}

ExecSpec Sh(const std::string& script) {
  ExecSpec s;
  s.argv = {"/bin/sh", "-c", script};
  s.timeout_ms = 20000;
  return s;
}

TEST(DrpcTaskQueue, SubmitWaitCancel) {
  TaskQueue q(1);
  Result<uint64_t> a = q.Submit(Sh("echo first"));
  Result<uint64_t> b = q.Submit(Sh("sleep 30"));
  Result<uint64_t> c = q.Submit(Sh("echo never"));  // queued behind b on the one slot
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  Result<TaskSnapshot> s = q.Wait(*a, 10000);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->phase, TaskPhase::kDone);
  EXPECT_EQ(s->output, "first\n");
  EXPECT_EQ(s->outcome.exit_code, 0);
  Result<TaskSnapshot> queued = q.Cancel(*c);
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->phase, TaskPhase::kCancelled);
  EXPECT_FALSE(queued->started);
  // b is running (or about to): a short wait returns its current phase.
  Result<TaskSnapshot> running = q.Wait(*b, 50);
  ASSERT_TRUE(running.ok());
  EXPECT_NE(running->phase, TaskPhase::kDone);
  Result<TaskSnapshot> cancelled = q.Cancel(*b);
  ASSERT_TRUE(cancelled.ok());
  if (cancelled->phase == TaskPhase::kRunning) cancelled = q.Wait(*b, 10000);
  EXPECT_EQ(cancelled->phase, TaskPhase::kCancelled);
  EXPECT_EQ(q.Wait(999, 0).status().code(), ENOENT);
  EXPECT_EQ(q.Cancel(999).status().code(), ENOENT);
  uint32_t nq = 9, nr = 9;
  q.Counts(&nq, &nr);
  EXPECT_EQ(nq, 0u);
  EXPECT_EQ(nr, 0u);
}

TEST(DrpcTaskQueue, SpawnFailureIsReported) {
  TaskQueue q(2);
  ExecSpec bad;
  bad.argv = {"/nonexistent/cmd"};
  Result<uint64_t> id = q.Submit(bad);
  ASSERT_TRUE(id.ok());
  Result<TaskSnapshot> s = q.Wait(*id, 10000);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->phase, TaskPhase::kDone);
  EXPECT_FALSE(s->started);
  EXPECT_NE(s->error.find("posix_spawnp"), std::string::npos) << s->error;
}

}  // namespace
}  // namespace san::drpc
