// The command line of san-bench: `san-bench latency|bandwidth [options]`, parsed by hand (a dozen
// options do not need a library), with the defaults that keep a full run of either subcommand
// under about a minute on two cores.
// Thread-safety: plain values.
#pragma once

#include <string>
#include <vector>

#include "measure.h"

namespace san::bench {

struct Options {
  Kind kind = Kind::kLatency;
  std::vector<uint32_t> sizes;  // default: per kind (DefaultSizes)
  Schedule schedule;
  std::vector<std::string> transports;  // as given: raw-shm, sanlib, sanlib-combine, tcp, unix
  std::vector<Mode> modes;
  std::string json_path, csv_path, plot_path;
  double stall_timeout_s = 60;
  std::string host = "127.0.0.1";  // --host: an IPv4 address of this host for the connections
};

std::vector<uint32_t> DefaultSizes(Kind kind);

// False with a message in *error (usage problems); *help set for -h/--help.
bool ParseOptions(int argc, char** argv, Options* options, bool* help, std::string* error);

const char* UsageText();

// "4 B", "64 KiB", "1 MiB", "1000 B"
std::string SizeLabel(uint32_t size);

}  // namespace san::bench
