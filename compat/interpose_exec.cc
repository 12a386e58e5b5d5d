// Interposed exec family -- execve, execv, execvp, execvpe, execl, execle, execlp, fexecve -- and
// the start-up hook that re-attaches inherited SAN connections in the new image.
//
// Before the real exec, socket/exec_handoff.h settles every SAN connection the new image would
// inherit: it moves (SAN_INHERIT=<memfd> added to the new environment) when the new image loads
// this layer (exec_target.h), else the new image gets a reset socket in its place. If the exec
// fails, everything is put back and errno is the exec's. A process that never made a SAN socket
// goes straight to libc.
//
// glibc's execvp/execl* call execve internally (not through the PLT), so each is interposed on
// its own. posix_spawn/posix_spawnp, system() and popen() run the child's execve inside glibc,
// where this file never sees it: compat/interpose_spawn.cc settles their children's connections.
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "compat/exec_target.h"
#include "compat/real_calls.h"
#include "compat/stdio_streams.h"
#include "sanlib/socket/exec_handoff.h"
#include "sanlib/socket/exec_image.h"
#include "sanlib/socket/runtime.h"

using san::compat::Real;

namespace {

// envp without any stale SAN_INHERIT, plus `entry` if not empty.
class Environment {
 public:
  Environment(char* const envp[], const std::string& entry) : entry_(entry) {
    const size_t key_len = strlen(san::exec::kInheritVariable);
    for (char* const* e = envp; e && *e; ++e) {
      if (strncmp(*e, san::exec::kInheritVariable, key_len) == 0 && (*e)[key_len] == '=') continue;
      vars_.push_back(*e);
    }
    if (!entry_.empty()) vars_.push_back(entry_.data());
    vars_.push_back(nullptr);
  }
  char* const* get() { return vars_.data(); }

 private:
  std::string entry_;
  std::vector<char*> vars_;
};

// Runs `run(envp')` with the SAN connections settled for an image at `image_path`.
template <typename Run>
int ExecWith(const char* image_path, char* const envp[], Run run) {
  if (!san::Runtime::IfCreated()) return run(envp);
  std::unique_ptr<san::ExecHandoff> handoff =
      san::ExecHandoff::Prepare(san::compat::NewImageRunsLayer(image_path, envp));
  if (!handoff) return run(envp);
  Environment env(envp, handoff->environment_entry());
  const int rc = run(env.get());
  const int err = errno;  // the exec failed
  handoff->Abandon();
  errno = err;
  return rc;
}

// execl*'s argument list up to its terminating null pointer.
std::vector<char*> CollectArgs(const char* first, va_list ap) {
  std::vector<char*> args{const_cast<char*>(first)};
  while (args.back()) args.push_back(va_arg(ap, char*));
  return args;
}

// The new image's side, before main(): connections the old image passed on.
__attribute__((constructor)) void AdoptInheritedConnections() {
  if (const char* value = getenv(san::exec::kInheritVariable)) {
    const std::string copy(value);  // AdoptInherited unsets the variable
    san::AdoptInherited(copy.c_str());
    san::compat::AttachStandardStreams();
  }
}

}  // namespace

extern "C" {

int execve(const char* path, char* const argv[], char* const envp[]) {
  return ExecWith(path, envp, [&](char* const* env) { return Real().execve(path, argv, env); });
}

int execv(const char* path, char* const argv[]) { return execve(path, argv, environ); }

int execvpe(const char* file, char* const argv[], char* const envp[]) {
  if (!san::Runtime::IfCreated()) return Real().execvpe(file, argv, envp);
  const std::string image = san::compat::ResolveOnPath(file);
  return ExecWith(image.c_str(), envp,
                  [&](char* const* env) { return Real().execvpe(file, argv, env); });
}

int execvp(const char* file, char* const argv[]) { return execvpe(file, argv, environ); }

int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> args = CollectArgs(arg, ap);
  va_end(ap);
  return execve(path, args.data(), environ);
}

int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> args = CollectArgs(arg, ap);
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(path, args.data(), envp);
}

int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  std::vector<char*> args = CollectArgs(arg, ap);
  va_end(ap);
  return execvp(file, args.data());
}

int fexecve(int fd, char* const argv[], char* const envp[]) {
  const std::string image = "/proc/self/fd/" + std::to_string(fd);
  return ExecWith(image.c_str(), envp,
                  [&](char* const* env) { return Real().fexecve(fd, argv, env); });
}

}  // extern "C"
