#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace san::drpc::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> Environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    bool replaced = false;
    for (const std::string& x : extra) {
      const size_t eq = x.find('=');
      if (strncmp(*e, x.c_str(), eq + 1) == 0) replaced = true;
    }
    if (!replaced) env.emplace_back(*e);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
            const std::string& out_path, const std::string& err_path) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = Environment(extra_env);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// Waits for pid up to timeout_s; kills it (SIGKILL) after that. Returns the wait status.
int Reap(pid_t pid, double timeout_s, bool* timed_out, double* cpu_seconds) {
  const Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  int status = 0;
  rusage usage{};
  for (;;) {
    const pid_t r = wait4(pid, &status, WNOHANG, &usage);
    if (r == pid) {
      *cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
      return status;
    }
    if (r < 0 && errno != EINTR) return 0;
    if (Clock::now() >= end) {
      *timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::string DrpcPath() { return DRPC_BIN; }
std::string DrpcdPath() { return DRPCD_BIN; }

RunResult RunProgram(const std::vector<std::string>& argv, const std::vector<std::string>& env,
              double timeout_s) {
  RunResult r;
  TempDir dir;
  const std::string out = dir.Join("out"), err = dir.Join("err");
  const Clock::time_point t0 = Clock::now();
  const pid_t pid = Spawn(argv, env, out, err);
  if (pid < 0) {
    r.err = "spawn failed: " + argv[0];
    return r;
  }
  const int status = Reap(pid, timeout_s, &r.timed_out, &r.cpu_seconds);
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/drpc-test-XXXXXX";
  if (mkdtemp(tmpl.data())) path_ = tmpl;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  // Directories a test made unreadable would stop remove_all: give them back first.
  for (auto it = std::filesystem::recursive_directory_iterator(
           path_, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) chmod(it->path().c_str(), 0700);
  }
  std::filesystem::remove_all(path_, ec);
}

void WriteFile(const std::string& path, const std::string& data, int mode) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  chmod(path.c_str(), static_cast<mode_t>(mode));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

Daemon::~Daemon() {
  if (pid_ > 0) Stop();
}

bool Daemon::Start(const std::string& dir, const std::string& listen_host,
                   const std::vector<std::string>& args, const std::vector<std::string>& env) {
  static int serial = 0;
  const std::string tag = std::to_string(getpid()) + "-" + std::to_string(++serial);
  const std::string port_file = dir + "/port-" + tag;
  log_ = dir + "/drpcd-" + tag + ".log";
  std::vector<std::string> argv = {DrpcdPath(), "--listen", listen_host + ":0", "--port-file",
                                   port_file};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = Spawn(argv, env, dir + "/drpcd-" + tag + ".out", log_);
  if (pid_ < 0) return false;
  const Clock::time_point end = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < end) {
    const std::string text = ReadFile(port_file);
    if (!text.empty() && text.back() == '\n') {
      port_ = atoi(text.c_str());
      return port_ > 0;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: a start-up error (in the log)
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Kill();
  return false;
}

int Daemon::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  bool timed_out = false;
  double cpu_seconds = 0;
  const int status = Reap(pid_, 10, &timed_out, &cpu_seconds);
  pid_ = -1;
  if (timed_out) return 999;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void Daemon::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

}  // namespace san::drpc::testing
