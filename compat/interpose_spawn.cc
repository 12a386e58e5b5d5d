// Interposed spawning calls -- posix_spawn, posix_spawnp, system, popen -- and the
// posix_spawn_file_actions_* calls whose actions they replay (compat/spawn_actions.h).
//
// glibc starts these children and execs them by itself (clone, then its internal execve), so the
// exec hand-off (compat/interpose_exec.cc) never runs for them, and a child holding one of our
// connections on shm held a kernel socket nobody used: a command run by system() with a client's
// connection as its stdout wrote into it and the client never saw a byte. So before the spawn,
// every connection the child will hold -- inherited (not close-on-exec, and not closed or
// replaced by the actions) or handed over by a dup2 action -- is settled as an fd passed to
// another process (socket/fd_passing.h): moved to kernel TCP on both ends, or kept off shm for
// good if it was still a late candidate. The parent and the child then share a plain TCP
// connection, as without sanlib. Connections the child will not hold stay as they are.
//
// Not seen: clone()/vfork() children that exec by raw system calls, and actions libc adds itself.
// Known gaps: a connection another thread accepts (inheritable) between the look and glibc's clone
// reaches the child unsettled; and a binary linked against glibc before 2.15 gets the current
// posix_spawn (ours is unversioned, and dlsym(RTLD_NEXT) finds the default version), which no
// longer runs a script without #! under /bin/sh (ENOEXEC instead).
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>

#include <vector>

#include "compat/real_calls.h"
#include "compat/spawn_actions.h"
#include "sanlib/socket/fd_passing.h"

using san::compat::Real;
using san::compat::SpawnAction;

namespace {

// Settles the connections a child will hold once `actions` have run (null: none) and `more`
// (libc's own, for popen) after them; `via` names the call.
void SettleForChild(const posix_spawn_file_actions_t* actions, const char* via,
                    const std::vector<SpawnAction>& more = {}) {
  const int saved = errno;
  const std::vector<san::PassableFd> parent = san::PassableFds();
  if (!parent.empty()) {
    std::vector<SpawnAction> list;
    std::vector<int> held;
    if (san::compat::RecordedActions(actions, &list)) {
      list.insert(list.end(), more.begin(), more.end());
      held = san::compat::HeldAfter(parent, list);
    } else {
      for (const san::PassableFd& p : parent) held.push_back(p.fd);
    }
    san::PrepareToPass(held.data(), held.size(), via);
  }
  errno = saved;
}

// Adds `action` to the record once libc has taken it (`rc` 0).
int Recorded(int rc, const posix_spawn_file_actions_t* actions, const SpawnAction& action) {
  if (rc == 0) san::compat::RecordAction(actions, action);
  return rc;
}

}  // namespace

extern "C" {

int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  SettleForChild(actions, "posix_spawn");
  return Real().posix_spawn(pid, path, actions, attr, argv, envp);
}

int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                 const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  SettleForChild(actions, "posix_spawnp");
  return Real().posix_spawnp(pid, file, actions, attr, argv, envp);
}

// system(NULL) only asks whether a shell is there.
int system(const char* command) {
  if (command) SettleForChild(nullptr, "system");
  return Real().system(command);
}

// The child's stdout (type "r") or stdin ("w") is popen's pipe, not the parent's fd of that number.
// The type is read as glibc reads it: any of 'r', 'w' and 'e', in any order, with 'r' or 'w' but
// not both ("er" and "rr" are valid, "rw" and "r+" are not); an invalid one fails in libc and
// settles nothing.
FILE* popen(const char* command, const char* type) {
  bool reads = false, writes = false, valid = command && type;
  for (const char* c = type; valid && *c; ++c) {
    reads = reads || *c == 'r';
    writes = writes || *c == 'w';
    valid = *c == 'r' || *c == 'w' || *c == 'e';
  }
  if (valid && reads != writes) {
    SettleForChild(nullptr, "popen", {{SpawnAction::kClose, reads ? 1 : 0}});
  }
  return Real().popen(command, type);
}

int posix_spawn_file_actions_init(posix_spawn_file_actions_t* actions) {
  const int rc = Real().spawn_actions_init(actions);
  if (rc == 0) san::compat::ForgetActions(actions);
  return rc;
}

int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t* actions) {
  san::compat::ForgetActions(actions);
  return Real().spawn_actions_destroy(actions);
}

int posix_spawn_file_actions_addclose(posix_spawn_file_actions_t* actions, int fd) {
  return Recorded(Real().spawn_actions_addclose(actions, fd), actions, {SpawnAction::kClose, fd});
}

int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t* actions, int fd, int newfd) {
  return Recorded(Real().spawn_actions_adddup2(actions, fd, newfd), actions,
                  {SpawnAction::kDup2, fd, newfd});
}

int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t* actions, int fd, const char* path,
                                     int oflag, mode_t mode) {
  return Recorded(Real().spawn_actions_addopen(actions, fd, path, oflag, mode), actions,
                  {SpawnAction::kOpen, fd});
}

int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t* actions, int from) {
  if (!Real().spawn_actions_addclosefrom_np) return ENOSYS;
  return Recorded(Real().spawn_actions_addclosefrom_np(actions, from), actions,
                  {SpawnAction::kCloseFrom, from});
}

int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t* actions, const char* path) {
  if (!Real().spawn_actions_addchdir_np) return ENOSYS;
  return Recorded(Real().spawn_actions_addchdir_np(actions, path), actions, {SpawnAction::kOther});
}

int posix_spawn_file_actions_addfchdir_np(posix_spawn_file_actions_t* actions, int fd) {
  if (!Real().spawn_actions_addfchdir_np) return ENOSYS;
  return Recorded(Real().spawn_actions_addfchdir_np(actions, fd), actions, {SpawnAction::kOther});
}

int posix_spawn_file_actions_addtcsetpgrp_np(posix_spawn_file_actions_t* actions, int fd) {
  if (!Real().spawn_actions_addtcsetpgrp_np) return ENOSYS;
  return Recorded(Real().spawn_actions_addtcsetpgrp_np(actions, fd), actions,
                  {SpawnAction::kOther});
}

}  // extern "C"
