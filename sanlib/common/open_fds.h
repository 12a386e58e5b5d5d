// OpenFds: which fds a process has open, read from /proc/self/fd with raw getdents64 (no
// allocation beyond the caller's vector, which it may reserve): for code that runs in a child
// about to exec, where the heap may be its parent's (vfork) -- close_range's interposer, the exec
// hand-off of a vfork child.
// The directory lists fds in ascending order, so the read stops past `last`: listing entries
// costs the kernel a dentry each (a process with 6,000 fds paid about 3 ms for a full listing).
// Thread-safety: reentrant; the answer is a snapshot.
#pragma once

#include <vector>

namespace san {

// Appends the open fds in [first, last] to `out` (the directory's own fd excluded). False if
// /proc cannot be read.
bool OpenFds(unsigned first, unsigned last, std::vector<int>* out);

}  // namespace san
