// conn-bench: figures of interleaved runs, summarised per metric as the median and range of each
// transport's runs, with the ratio SAN/TCP of the medians; printed as a table and written as CSV.
//
// Rows keep the order in which their metrics were first added. A failed run adds no figures but
// is counted and its reason kept, and the table prints it in a FAILED line of its own. Not
// thread-safe.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace san::connbench {

class Summary {
 public:
  // One run's figure. `transport` is "san" or "tcp"; `load` the 1-minute load average beside it.
  void Add(const std::string& workload, const std::string& metric, const std::string& unit,
           const std::string& transport, int run, double value, double load);
  // One run that produced no figures.
  void AddFailure(const std::string& workload, const std::string& transport, int run,
                  const std::string& why, double load);
  // A remark printed under the workload (fallbacks, caps); repeated text is kept once.
  void AddNote(const std::string& workload, const std::string& text);

  void Print(FILE* out) const;
  // Appends the summary rows to `path` (a header first if the file is new or empty), and the
  // per-run figures to `runs_path` if not empty. False if a file could not be written.
  bool WriteCsv(const std::string& path, const std::string& runs_path) const;

 private:
  struct Figures {
    std::vector<double> values;
    std::vector<double> loads;
  };
  struct Row {
    std::string workload, metric, unit;
    std::map<std::string, Figures> by_transport;
  };
  struct RunFigure {
    std::string workload, metric, unit, transport;
    int run;
    double value, load;
  };
  struct Failure {
    std::string workload, transport, why;
    int run;
    double load;
  };
  Row& FindRow(const std::string& workload, const std::string& metric, const std::string& unit);

  std::vector<Row> rows_;
  std::vector<RunFigure> runs_;
  std::vector<Failure> failures_;
  std::vector<std::pair<std::string, std::string>> notes_;
};

}  // namespace san::connbench
