// SystemStatus: what Status reports about the node itself, read from the kernel (/proc,
// getloadavg, sysconf). Fields that cannot be read stay 0 rather than failing the call.
// Thread-safety: stateless.
#pragma once

#include <cstdint>
#include <string>

namespace san::drpc {

struct SystemStatus {
  std::string hostname;
  double uptime_s = 0;
  double load[3] = {0, 0, 0};
  uint64_t mem_total_bytes = 0;
  uint64_t mem_available_bytes = 0;
  uint32_t cpus = 0;
};

SystemStatus ReadSystemStatus();

}  // namespace san::drpc
