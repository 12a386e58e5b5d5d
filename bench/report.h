// What san-bench prints and writes: the tables on stdout (each SAN figure beside the kernel
// baselines and the raw provider, with ratio columns), JSON and CSV rows, and a gnuplot PNG with
// the curves (latency or bandwidth against message size, log-x, like SOVIA's Figure 9).
// Thread-safety: plain functions over values.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "measure.h"
#include "sanlib/common/status.h"

namespace san::bench {

struct ReportInfo {
  Kind kind = Kind::kLatency;
  std::vector<std::string> header;  // printed above the tables and used in the plot's title
  std::vector<Mode> modes;
  std::vector<uint32_t> sizes;
};

void PrintReport(FILE* out, const ReportInfo& info, const std::vector<Row>& rows);

// latency: {"transport", "mode", "size", "one_way_us", "p99_us"}
// bandwidth: {"transport", "mode", "size", "gbytes_per_s"}
Status WriteJson(const std::string& path, const std::vector<Row>& rows);
// The same fields, one row per line, with a header line.
Status WriteCsv(const std::string& path, const std::vector<Row>& rows);

// Runs gnuplot on a generated script. False with *message when gnuplot is not installed or did
// not produce the file: that is not a benchmark error (the rows are still written).
bool WritePlot(const std::string& path, const ReportInfo& info, const std::vector<Row>& rows,
               std::string* message);

}  // namespace san::bench
