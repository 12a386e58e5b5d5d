// conn-bench: the command line. `conn-bench churn|hold [options]`; ParseOptions prints usage or the
// error itself and says whether to go on.
#pragma once

#include <string>
#include <vector>

namespace san::connbench {

struct Options {
  std::string command;                                   // "churn" or "hold"
  std::vector<std::string> transports = {"san", "tcp"};  // interleaved in this order every run
  int runs = 5;
  std::vector<int> clients = {1, 4};  // churn: one measurement per entry
  double seconds = 2.0;               // churn: each client's loop
  bool echo = true;                   // churn: false: no byte (--exchange none)
  bool fork_server = false;           // churn: a child per connection (--server fork)
  long connections = 10000;           // hold
  int timeout_s = 0;                  // 0: the workload's default
  std::string csv;                    // summary rows, appended
  std::string runs_csv;               // per-run figures, appended
};

// 0: run; 1: exit 0 (help printed); 2: exit 2 (usage error printed).
int ParseOptions(int argc, char** argv, Options* options);

}  // namespace san::connbench
