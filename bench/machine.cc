#include "machine.h"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

namespace san::bench {

Machine DescribeMachine() {
  Machine m;
  utsname u;
  if (uname(&u) == 0) {
    m.hostname = u.nodename;
    m.kernel = u.release;
    m.arch = u.machine;
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  m.online_cpus = online > 0 ? static_cast<int>(online) : 1;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) m.allowed_cpus.push_back(cpu);
    }
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos)
        m.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
      break;
    }
  }
  return m;
}

std::string Summary(const Machine& m) {
  std::string s = std::to_string(m.online_cpus) + (m.online_cpus == 1 ? " CPU" : " CPUs");
  if (!m.cpu_model.empty()) s += " (" + m.cpu_model + ")";
  s += ", Linux " + m.kernel + " " + m.arch + ", host " + m.hostname;
  return s;
}

CpuPlacement PlaceOnTwoCpus(const Machine& m) {
  CpuPlacement p;
  if (m.allowed_cpus.size() >= 2) {
    p.server = m.allowed_cpus[0];
    p.client = m.allowed_cpus[1];
  }
  return p;
}

double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  if (!(in >> load)) return -1;
  return load;
}

bool PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

}  // namespace san::bench
