// Spawn file actions: what a posix_spawn_file_actions_t asks the child to do with its fds, and
// which of the parent's SAN connections the child therefore ends up holding.
//
// glibc runs a posix_spawn child's actions and its execve inside libc, where no interposition
// reaches, and keeps the actions in a list private to it. So the layer records each action as the
// program adds it (the interposed posix_spawn_file_actions_* calls, compat/interpose_spawn.cc) and
// replays them here over the parent's fds to find the connections to settle before the spawn
// (socket/fd_passing.h). An actions object this layer never saw being built whole (no record, or
// fewer actions recorded than glibc counts in it) is answered with every connection the parent
// has: moving one to kernel TCP needlessly costs speed, leaving one the child holds on shm would
// cost its bytes.
//
// Thread-safety: the record functions are thread-safe (one mutex, held across forks); HeldAfter is
// a pure function.
#pragma once

#include <spawn.h>

#include <vector>

#include "sanlib/socket/fd_passing.h"

namespace san::compat {

struct SpawnAction {
  // kOther: an action that changes no fd (chdir, fchdir, tcsetpgrp), kept for the count.
  enum Kind { kClose, kDup2, kOpen, kCloseFrom, kOther };
  Kind kind;
  int fd = -1;    // kClose, kOpen: the number; kDup2: the source; kCloseFrom: the lowest closed
  int newfd = 0;  // kDup2: the target
};

// Which of `parent` (the parent's connection fds and their close-on-exec flags) the child holds
// once `actions` have run in order and it has exec'd: the parent numbers of the connections some
// fd of the child names. A dup2 onto itself clears close-on-exec (as glibc's does); an fd that
// `parent` does not list is another file.
std::vector<int> HeldAfter(const std::vector<PassableFd>& parent,
                           const std::vector<SpawnAction>& actions);

// The record of `actions`: Forget at init and destroy, Record as each action is added.
void ForgetActions(const posix_spawn_file_actions_t* actions);
void RecordAction(const posix_spawn_file_actions_t* actions, const SpawnAction& action);
// The actions recorded for `actions` into `out`; false if the layer has no record of an object
// that holds actions (it was built before the layer was loaded, or by libc itself).
bool RecordedActions(const posix_spawn_file_actions_t* actions, std::vector<SpawnAction>* out);

}  // namespace san::compat
