#include "drpc/node/system_status.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace san::drpc {

SystemStatus ReadSystemStatus() {
  SystemStatus s;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) s.hostname = host;
  if (FILE* f = fopen("/proc/uptime", "re")) {
    if (fscanf(f, "%lf", &s.uptime_s) != 1) s.uptime_s = 0;
    fclose(f);
  }
  if (getloadavg(s.load, 3) != 3) s.load[0] = s.load[1] = s.load[2] = 0;
  if (FILE* f = fopen("/proc/meminfo", "re")) {
    char line[256];
    while (fgets(line, sizeof line, f)) {
      unsigned long long kib = 0;
      if (sscanf(line, "MemTotal: %llu kB", &kib) == 1) s.mem_total_bytes = kib * 1024;
      if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1) s.mem_available_bytes = kib * 1024;
    }
    fclose(f);
  }
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  s.cpus = cpus > 0 ? static_cast<uint32_t>(cpus) : 0;
  return s;
}

}  // namespace san::drpc
