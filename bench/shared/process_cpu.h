// CPU time of a process, for the benchmarks that put CPU per operation beside their figures
// (bench/report). Header-only: the benchmarks are separate programs in separate folders and
// share nothing else.
//
// ProcessCpuSeconds(pid): seconds on a CPU of every living thread of a process, in nanoseconds
// from /proc/<pid>/task/*/schedstat; where that is missing, user + system from /proc/<pid>/stat
// (clock ticks, 10 ms: useless for a short spin of a server, hence schedstat first). Threads that
// have ended are not in schedstat: take deltas across a window in which none ends.
// SelfCpuSeconds(): user + system of the calling process, from getrusage (microseconds).
// Thread-safe (reads only); 0 when the process is gone or /proc cannot be read.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace san::bench {

inline double ProcessStatCpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');  // the name may hold blanks and parentheses
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string skip;
  for (int i = 3; i < 14; ++i) fields >> skip;  // state .. cmajflt (fields 3-13)
  unsigned long long utime = 0, stime = 0;
  fields >> utime >> stime;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

inline double ProcessCpuSeconds(pid_t pid) {
  std::error_code ec;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  unsigned long long ns = 0;
  bool any = false;
  for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream in(t.path() / "schedstat");
    unsigned long long on_cpu = 0;
    if (in >> on_cpu) {
      ns += on_cpu;
      any = true;
    }
  }
  return any ? static_cast<double>(ns) / 1e9 : ProcessStatCpuSeconds(pid);
}

inline double SelfCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace san::bench
