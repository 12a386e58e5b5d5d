#include "support/process.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace san::testing_support {

int ExitCode(int wait_status) {
  if (wait_status < 0) return wait_status;
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

int ExitedCode(int wait_status) {
  return wait_status >= 0 && WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

int WaitBounded(pid_t pid, int timeout_ms, rusage* usage) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int status = 0;
    const pid_t r = wait4(pid, &status, timeout_ms < 0 ? 0 : WNOHANG, usage);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return kNotAChild;
    if (r == 0 && std::chrono::steady_clock::now() >= end) return kStillRunning;
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int WaitOrKill(pid_t pid, int timeout_ms, bool group) {
  const int status = WaitBounded(pid, timeout_ms);
  if (status != kStillRunning) return status;
  KillAndReap(pid, group);
  return kStillRunning;
}

int KillAndReap(pid_t pid, bool group) {
  if (group) kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  return WaitBounded(pid, -1);
}

namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string FindProgram(const std::string& program) {
  if (program.empty()) return "";
  if (program.find('/') != std::string::npos) return IsExecutableFile(program) ? program : "";
  const char* path = getenv("PATH");
  std::stringstream dirs(path ? path : "/bin:/usr/bin");  // execvp's default
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (IsExecutableFile(candidate)) return candidate;
  }
  return "";
}

}  // namespace san::testing_support
