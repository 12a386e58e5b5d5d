// Reading sanlib processes' stat reports (socket/control_service.h) for `sanstat`: finding the
// "@sanlib/ctl/<pid>" sockets in /proc/net/unix, fetching each report and parsing it into rows.
//
// Parsing never trusts the text (it comes from another process): a malformed line is skipped and
// counted, never a crash. Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace san::tools {

struct StatRow {
  int pid = 0;
  std::string comm;
  int fd = -1;
  std::string role, mode, local, peer, phase, reason;
  uint64_t bytes_sent = 0, bytes_received = 0;
  uint32_t credits = 0, mtu = 0;
};

// PIDs with a stat socket in this network namespace (from the text of /proc/net/unix).
std::vector<int> StatPids(const std::string& proc_net_unix);
// The raw report of one process, or "" if it does not answer within timeout_ms.
std::string FetchReport(int pid, int timeout_ms);
// Appends the rows of one report; returns how many lines were malformed.
int ParseReport(const std::string& report, std::vector<StatRow>* rows);

}  // namespace san::tools
