#include "support/program.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/process.h"

extern char** environ;

namespace san::testing_support {
namespace {

using Clock = std::chrono::steady_clock;

// This process's environment with `extra` ("NAME=value") replacing or added to it, in order (a
// later setting of a name wins).
std::vector<std::string> Environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  for (const std::string& x : extra) {
    const std::string name = x.substr(0, x.find('=') + 1);
    std::erase_if(env, [&](const std::string& e) { return e.compare(0, name.size(), name) == 0; });
    env.push_back(x);
  }
  return env;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void Redirect(posix_spawn_file_actions_t* actions, int target, const std::string& path, int fd,
              int flags) {
  if (!path.empty()) {
    posix_spawn_file_actions_addopen(actions, target, path.c_str(), flags, 0644);
  } else if (fd >= 0) {
    posix_spawn_file_actions_adddup2(actions, fd, target);
  }
}

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A new empty file of ours under $TMPDIR (or /tmp): its path, "" if it could not be made.
std::string ScratchFile(const std::string& tag) {
  const char* dir = getenv("TMPDIR");
  std::string path = std::string(dir && *dir ? dir : "/tmp") + "/san_program_" + tag + "_XXXXXX";
  const int fd = mkstemp(path.data());
  if (fd < 0) return "";
  close(fd);
  return path;
}

}  // namespace

bool Program::Start(const ProgramSpec& spec) {
  Shutdown();
  group_ = -1;
  stop_signal_ = spec.stop_signal;
  stop_timeout_ms_ = spec.stop_timeout_ms;
  stdout_path_ = spec.stdout_path;
  std::vector<std::string> argv;
  if (!spec.sanrun.empty()) argv = {spec.sanrun, "--"};
  argv.insert(argv.end(), spec.argv.begin(), spec.argv.end());
  if (argv.empty()) {
    error_ = "no program to run";
    return false;
  }
  std::vector<std::string> env = Environment(spec.env);
  std::vector<char*> args = Pointers(argv), envp = Pointers(env);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const int out_flags = O_WRONLY | O_CREAT | (spec.append ? O_APPEND : O_TRUNC);
  Redirect(&actions, STDIN_FILENO, spec.stdin_path, spec.stdin_fd, O_RDONLY);
  Redirect(&actions, STDOUT_FILENO, spec.stdout_path, spec.stdout_fd, out_flags);
  if (!spec.stderr_path.empty() && spec.stderr_path == spec.stdout_path) {
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  } else {
    Redirect(&actions, STDERR_FILENO, spec.stderr_path, -1, out_flags);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  short flags = POSIX_SPAWN_SETSIGDEF;
  if (spec.own_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  const int rc = posix_spawnp(&pid_, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    error_ = "posix_spawn " + argv[0] + ": " + strerror(rc);
    return false;
  }
  group_ = spec.own_group ? pid_ : -1;
  error_.clear();
  return true;
}

std::string Program::Output() const { return ReadWhole(stdout_path_); }

int Program::WaitStatus(int timeout_ms, rusage* usage) {
  if (pid_ <= 0) return kNotAChild;
  const int status = WaitBounded(pid_, timeout_ms, usage);
  if (status != kStillRunning) pid_ = -1;
  return status;
}

int Program::Wait(int timeout_ms) {
  if (pid_ <= 0) return -1;
  const int status = WaitOrKill(pid_, timeout_ms, group_ > 0);
  pid_ = -1;
  return ExitCode(status);
}

bool Program::Signal(int sig) const { return pid_ > 0 && kill(pid_, sig) == 0; }

int Program::Stop(int sig, int timeout_ms) {
  Signal(sig);
  return Wait(timeout_ms);
}

int Program::Kill() {
  if (pid_ <= 0) return kNotAChild;
  const int status = KillAndReap(pid_, group_ > 0);
  pid_ = -1;
  return status;
}

void Program::KillGroup() const {
  if (group_ > 0) kill(-group_, SIGKILL);
}

void Program::Shutdown() {
  if (pid_ <= 0) return;  // ended and reaped: what it left in its group is the caller's
  if (stop_signal_ != SIGKILL) {
    Signal(stop_signal_);
    if (WaitStatus(stop_timeout_ms_) == kStillRunning) Kill();
  }
  if (pid_ > 0) Kill();
  KillGroup();
}

RunResult RunProgram(const std::vector<std::string>& argv, double timeout_s,
                     const std::string& input, const std::vector<std::string>& env) {
  RunResult result;
  ProgramSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.own_group = true;
  spec.stdin_path = ScratchFile("in");
  spec.stdout_path = ScratchFile("out");
  spec.stderr_path = ScratchFile("err");
  std::ofstream(spec.stdin_path, std::ios::binary) << input;
  const Clock::time_point t0 = Clock::now();
  Program program;
  if (program.Start(spec)) {
    rusage usage{};
    int status = program.WaitStatus(static_cast<int>(timeout_s * 1000), &usage);
    if (status == kStillRunning) {
      result.timed_out = true;
      status = program.Kill();
    } else {
      result.cpu_seconds =
          static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
          static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    }
    program.KillGroup();  // anything it left behind in its process group
    result.exit_code = ExitedCode(status);
    if (status >= 0 && WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    result.out = ReadWhole(spec.stdout_path);
    result.err = ReadWhole(spec.stderr_path);
  } else {
    result.err = program.error();
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const std::string* path : {&spec.stdin_path, &spec.stdout_path, &spec.stderr_path}) {
    unlink(path->c_str());
  }
  return result;
}

Interactive::~Interactive() {
  CloseInput();
  if (program_.running()) Wait(0);
  unlink(out_path_.c_str());
  unlink(err_path_.c_str());
}

bool Interactive::Start(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return false;
  out_path_ = ScratchFile("out");
  err_path_ = ScratchFile("err");
  ProgramSpec spec;
  spec.argv = argv;
  spec.own_group = true;
  spec.stdin_fd = pipe_fds[0];
  spec.stdout_path = out_path_;
  spec.stderr_path = err_path_;
  const bool started = program_.Start(spec);
  close(pipe_fds[0]);
  if (!started) {
    close(pipe_fds[1]);
    return false;
  }
  input_ = pipe_fds[1];
  return true;
}

bool Interactive::Write(const std::string& text) {
  if (input_ < 0) return false;
  signal(SIGPIPE, SIG_IGN);  // a child that already left must not kill the test
  return write(input_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

void Interactive::CloseInput() {
  if (input_ >= 0) close(input_);
  input_ = -1;
}

int Interactive::Wait(int timeout_ms) {
  if (!program_.running()) return -1;
  const int status = program_.WaitStatus(timeout_ms);
  if (status == kStillRunning) program_.Kill();
  program_.KillGroup();
  return ExitedCode(status);
}

std::string Interactive::err() const { return ReadWhole(err_path_); }

bool Interactive::WaitForOutput(const std::string& text, int timeout_ms) const {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (out().find(text) == std::string::npos) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

}  // namespace san::testing_support
