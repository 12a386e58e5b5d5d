// The machine the benchmark runs on (for the header line of every report) and CPU pinning.
// Thread-safety: plain functions; PinToCpu affects the calling thread (and threads it creates
// later).
#pragma once

#include <string>
#include <vector>

namespace san::bench {

struct Machine {
  std::string hostname;
  std::string kernel;     // uname release
  std::string arch;       // uname machine
  std::string cpu_model;  // /proc/cpuinfo "model name", "" if unknown
  int online_cpus = 1;
  std::vector<int> allowed_cpus;  // this process's affinity mask
};

Machine DescribeMachine();

// "2 CPUs (AMD EPYC), Linux 6.1.0 x86_64, host vm"
std::string Summary(const Machine& m);

// Where the two benchmark processes run: two distinct CPUs, or -1 for both (not pinned: the
// machine offers only one CPU).
struct CpuPlacement {
  int server = -1;
  int client = -1;
  bool pinned() const { return server >= 0; }
};
CpuPlacement PlaceOnTwoCpus(const Machine& m);

// The 1-minute load average (/proc/loadavg), or -1. Above ~0 while san-bench runs, other
// processes compete for the CPUs and the figures are noisy: the header says so.
double LoadAverage();

// sched_setaffinity for the calling thread; false (errno set) if the kernel refused.
bool PinToCpu(int cpu);

}  // namespace san::bench
