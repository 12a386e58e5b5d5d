// Running one transport in one mode over a list of sizes: two fresh processes, forked from the
// coordinator (which itself never touches a transport), each pinned to its own CPU.
//
//   coordinator --fork--> server process: Listen, send the address down a pipe, Serve until quit
//               --fork--> client process: read the address, MeasurePoint for each size, one line
//                         per result up a pipe to the coordinator, then SendQuit
//
// Fresh processes per run matter for sanlib: its configuration (SAN_SPIN_US) is read once per
// process, on first use, so each child sets it for its mode before its first san_* call.
// The coordinator watches for progress: a run that reports nothing for `stall_timeout_s` is killed
// and reported as hung (a real error: a lost wake-up or a wedged connection, not a slow machine).
// Thread-safety: call from the single-threaded coordinator only.
#pragma once

#include <string>
#include <vector>

#include "machine.h"
#include "measure.h"

namespace san::bench {

// SAN_SPIN_US for each mode.
const char* SpinUsFor(Mode mode);

struct RunSpec {
  Kind kind = Kind::kLatency;
  std::string row_name;   // what the rows are called ("sanlib-combine" is transport "sanlib")
  std::string transport;  // MakeTransport name
  bool nodelay = false;
  Mode mode = Mode::kSpin;
  std::vector<uint32_t> sizes;
  Schedule schedule;
  CpuPlacement cpus;
  double stall_timeout_s = 60;
};

struct RunOutcome {
  std::vector<Row> rows;
  std::vector<std::string> errors;  // empty: every size measured and verified
  double seconds = 0;               // wall time of the run
};

RunOutcome RunPair(const RunSpec& spec);

}  // namespace san::bench
