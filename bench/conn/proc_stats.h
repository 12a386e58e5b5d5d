// conn-bench: what /proc and getrusage say about a process and the host -- open fds, memory
// (smaps_rollup), kernel slab, CPU time, load average -- and raising the fd limit.
//
// Readers return -1 (or an empty value) when the file cannot be read; callers print "-" then.
// Plain functions, no state: thread-safe.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <string>

namespace san::connbench {

// Entries in /proc/self/fd.
long CountOpenFds();

// /proc/<pid>/smaps_rollup (pid 0: self): resident and proportional set in KiB (Pss splits each
// shared page among the processes that map it, so summing Pss over processes counts it once).
struct MemoryUse {
  long rss_kib = -1;
  long pss_kib = -1;
  long pss_shmem_kib = -1;  // the part of Pss in shared memory (sanlib's segments, memfds)
};
MemoryUse ReadMemoryUse(pid_t pid);

// /proc/meminfo "Slab:" in KiB: host-wide kernel object memory (sockets, files, inodes). Noisy,
// but with thousands of connections the difference is theirs.
long ReadSlabKib();

// The 1-minute load average.
double LoadAverage1();

// user + system CPU of a finished child, in microseconds.
double CpuMicros(const rusage& usage);

// Raises RLIMIT_NOFILE's soft limit to `wanted` fds: first within the hard limit, and if that is
// lower, the hard limit too where the process may (CAP_SYS_RESOURCE). Returns the soft limit now
// in force; *note receives a sentence when it is below `wanted`.
long RaiseFdLimit(long wanted, std::string* note);

}  // namespace san::connbench
