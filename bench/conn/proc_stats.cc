// conn-bench: readings from /proc and getrusage (proc_stats.h).
#include "proc_stats.h"

#include <dirent.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace san::connbench {

long CountOpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  long count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;  // the directory stream's own fd
}

MemoryUse ReadMemoryUse(pid_t pid) {
  MemoryUse use;
  const std::string path =
      pid == 0 ? "/proc/self/smaps_rollup" : "/proc/" + std::to_string(pid) + "/smaps_rollup";
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    long kib = -1;
    fields >> key >> kib;
    if (key == "Rss:") use.rss_kib = kib;
    if (key == "Pss:") use.pss_kib = kib;
    if (key == "Pss_Shmem:") use.pss_shmem_kib = kib;
  }
  return use;
}

long ReadSlabKib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long kib = -1;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "Slab:") return kib;
  }
  return -1;
}

double LoadAverage1() {
  double load = -1;
  if (FILE* f = fopen("/proc/loadavg", "r")) {
    if (fscanf(f, "%lf", &load) != 1) load = -1;
    fclose(f);
  }
  return load;
}

double CpuMicros(const rusage& usage) {
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e6 + usage.ru_utime.tv_usec +
         usage.ru_stime.tv_usec;
}

long RaiseFdLimit(long wanted, std::string* note) {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  const rlim_t want = static_cast<rlim_t>(wanted);
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < want) {
    rlimit raised = {want, want};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur < want) {
    limit.rlim_cur = limit.rlim_max == RLIM_INFINITY || limit.rlim_max > want ? want : limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur < want && note != nullptr) {
    *note = "fd limit " + std::to_string(limit.rlim_cur) + " (hard " +
            std::to_string(limit.rlim_max) + ") is below the " + std::to_string(wanted) +
            " wanted: connections may be capped by EMFILE";
  }
  return static_cast<long>(limit.rlim_cur);
}

}  // namespace san::connbench
