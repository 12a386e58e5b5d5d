#include "drpc/node/exec_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "sanlib/common/unique_fd.h"

extern char** environ;

namespace san::drpc {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MsUntil(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
}

// The daemon's environment with the request's entries added or replacing.
std::vector<std::string> BuildEnvironment(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const char* eq = strchr(*e, '=');
    const std::string name = eq ? std::string(*e, static_cast<size_t>(eq - *e)) : std::string(*e);
    if (!extra.count(name)) env.emplace_back(*e);
  }
  for (const auto& [name, value] : extra) {
    std::string entry = name;
    entry.push_back('=');
    entry.append(value);
    env.push_back(std::move(entry));
  }
  return env;
}

// posix_spawn's attribute and file-action objects, released on every path.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

}  // namespace

Result<ExecOutcome> RunCommand(const ExecSpec& spec, const OutputSink& sink,
                               const CancelCheck& cancelled) {
  if (spec.argv.empty() || spec.argv[0].empty()) return Status(EINVAL, "exec: empty command");
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe2");
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return Status::FromErrno("pipe2");
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);

  SpawnSetup s;
  posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&s.actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&s.actions, err_w.get(), 2);
  posix_spawn_file_actions_addclosefrom_np(&s.actions, 3);
  if (!spec.cwd.empty()) posix_spawn_file_actions_addchdir_np(&s.actions, spec.cwd.c_str());
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&s.attr, &none);
  posix_spawnattr_setsigdefault(&s.attr, &all);  // the daemon ignores SIGPIPE; commands must not
  posix_spawnattr_setpgroup(&s.attr, 0);
  posix_spawnattr_setflags(&s.attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = BuildEnvironment(spec.env);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  const Clock::time_point start = Clock::now();
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &s.actions, &s.attr, argv.data(), envp.data());
  if (rc != 0) {
    errno = rc;
    return Status::FromErrno("posix_spawnp");
  }
  out_w.reset();
  err_w.reset();

  ExecOutcome outcome;
  const Clock::time_point deadline = spec.timeout_ms
                                         ? start + std::chrono::milliseconds(spec.timeout_ms)
                                         : Clock::time_point::max();
  bool exited = false;
  int wait_status = 0;
  Clock::time_point drain_until = Clock::time_point::max();
  bool killed = false;
  auto kill_group = [&] {
    if (!killed) kill(-pid, SIGKILL);
    killed = true;
  };
  static thread_local char buffer[64 * 1024];
  while (out_r.valid() || err_r.valid()) {
    if (!exited && waitpid(pid, &wait_status, WNOHANG) == pid) {
      exited = true;
      drain_until = Clock::now() + std::chrono::milliseconds(200);
    }
    if (cancelled && cancelled()) {
      outcome.cancelled = true;
      kill_group();
      break;
    }
    if (!exited && Clock::now() >= deadline) {
      outcome.timed_out = true;
      kill_group();
      break;
    }
    if (exited && Clock::now() >= drain_until) break;
    // Wake up at least every 100 ms to look at the child, the cancel check and the clock.
    int64_t wait_ms = 100;
    if (!exited && deadline != Clock::time_point::max())
      wait_ms = std::min(wait_ms, MsUntil(deadline));
    if (exited) wait_ms = std::min(wait_ms, MsUntil(drain_until));
    if (wait_ms < 0) wait_ms = 0;
    pollfd fds[2];
    nfds_t n = 0;
    UniqueFd* owners[2];
    if (out_r.valid()) {
      fds[n] = {out_r.get(), POLLIN, 0};
      owners[n++] = &out_r;
    }
    if (err_r.valid()) {
      fds[n] = {err_r.get(), POLLIN, 0};
      owners[n++] = &err_r;
    }
    const int ready = poll(fds, n, static_cast<int>(wait_ms));
    if (ready < 0 && errno != EINTR) break;
    for (nfds_t i = 0; ready > 0 && i < n; ++i) {
      if (!fds[i].revents) continue;
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        owners[i]->reset();
        continue;
      }
      outcome.output_bytes += static_cast<uint64_t>(got);
      const OutputStream which =
          owners[i] == &out_r ? OutputStream::kStdout : OutputStream::kStderr;
      if (!sink(which, buffer, static_cast<size_t>(got))) {
        outcome.cancelled = true;
        kill_group();
        break;
      }
    }
    if (outcome.cancelled) break;
  }
  // Both pipes at EOF but the command not reaped yet: it is exiting (or closed its output and
  // carries on). Wait for it within the timeout, watching the cancel check.
  while (!exited && !outcome.cancelled && !outcome.timed_out) {
    const pid_t w = waitpid(pid, &wait_status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) {
      exited = w == pid;
      break;
    }
    if (cancelled && cancelled()) {
      outcome.cancelled = true;
    } else if (Clock::now() >= deadline) {
      outcome.timed_out = true;
    } else {
      usleep(2000);
    }
  }
  // What is left of the group once the command is done (or stopped) must not outlive the call.
  kill(-pid, SIGKILL);
  if (!exited) {
    while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
    }
  }
  outcome.duration_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count());
  if (WIFEXITED(wait_status)) {
    outcome.exit_code = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    outcome.signal = WTERMSIG(wait_status);
  }
  return outcome;
}

}  // namespace san::drpc
