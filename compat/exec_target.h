// ExecTarget: will the image an exec() starts load this compatibility layer?
//
// That decides whether a SAN connection can follow it (socket/exec_handoff.h). The new image
// loads the layer when its environment's LD_PRELOAD names libsan_preload.so and the dynamic
// loader honours it: not for a static executable (no PT_INTERP), a 32-bit one, or one the exec
// makes privileged (set-user/group-ID for another user: secure mode ignores such a preload). A
// script (#!) is judged by its interpreter. A file we cannot read (execute-only) or do not
// recognise is taken to be an ordinary dynamic program: execvp runs unknown formats with /bin/sh,
// and execve fails on them (then everything is put back).
//
// A program linked with libsan_compat (not preloaded) cannot be told from a plain one: it counts
// as "does not load the layer" (its inherited SAN sockets get the reset placeholder).
// Thread-safety: plain functions (file reads only).
#pragma once

#include <string>

namespace san::compat {

// `path`: the file exec will run; `envp`: the environment it gets (may be null).
bool NewImageRunsLayer(const char* path, char* const envp[]);
// The file execvp/execvpe would run for `file` (as glibc searches PATH: the caller's PATH, or
// the default when unset); `file` itself if it has a '/' or nothing executable is found.
std::string ResolveOnPath(const char* file);

}  // namespace san::compat
