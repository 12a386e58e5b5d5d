// conn-bench: medians, ranges, ratios; the table and the CSV (summary.h).
#include "summary.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

namespace san::connbench {
namespace {

struct Spread {
  int runs = 0;
  double median = NAN, min = NAN, max = NAN;
};

Spread SpreadOf(std::vector<double> v) {
  Spread s;
  s.runs = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  return s;
}

std::string Num(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e5 || (a > 0 && a < 1e-3)) {
    snprintf(buf, sizeof buf, "%.3g", v);
  } else if (a >= 100) {
    snprintf(buf, sizeof buf, "%.0f", v);
  } else if (a >= 10) {
    snprintf(buf, sizeof buf, "%.1f", v);
  } else {
    snprintf(buf, sizeof buf, "%.3g", v);
  }
  return buf;
}

std::string Cell(const Spread& s) {
  if (s.runs == 0) return "-";
  return Num(s.median) + " [" + Num(s.min) + ".." + Num(s.max) + "]";
}

std::string Ratio(const Spread& san, const Spread& tcp) {
  if (san.runs == 0 || tcp.runs == 0 || tcp.median == 0) return "-";
  char buf[32];
  snprintf(buf, sizeof buf, "%.2fx", san.median / tcp.median);
  return buf;
}

Spread LoadsOf(const std::map<std::string, std::vector<double>>& loads) {
  std::vector<double> all;
  for (const auto& [t, v] : loads) all.insert(all.end(), v.begin(), v.end());
  return SpreadOf(all);
}

}  // namespace

Summary::Row& Summary::FindRow(const std::string& workload, const std::string& metric,
                               const std::string& unit) {
  for (Row& r : rows_) {
    if (r.workload == workload && r.metric == metric) return r;
  }
  rows_.push_back(Row{workload, metric, unit, {}});
  return rows_.back();
}

void Summary::Add(const std::string& workload, const std::string& metric, const std::string& unit,
                  const std::string& transport, int run, double value, double load) {
  Figures& f = FindRow(workload, metric, unit).by_transport[transport];
  f.values.push_back(value);
  f.loads.push_back(load);
  runs_.push_back(RunFigure{workload, metric, unit, transport, run, value, load});
}

void Summary::AddFailure(const std::string& workload, const std::string& transport, int run,
                         const std::string& why, double load) {
  failures_.push_back(Failure{workload, transport, why, run, load});
}

void Summary::AddNote(const std::string& workload, const std::string& text) {
  for (const auto& n : notes_) {
    if (n.first == workload && n.second == text) return;
  }
  notes_.emplace_back(workload, text);
}

void Summary::Print(FILE* out) const {
  fprintf(out, "%-22s %-18s %-30s %-30s %8s  %s\n", "workload", "metric", "SAN median [range]",
          "TCP median [range]", "SAN/TCP", "load1");
  std::set<std::string> done;
  auto print_workload_tail = [&](const std::string& w) {
    for (const Failure& f : failures_) {
      if (f.workload == w) {
        fprintf(out, "%-22s FAILED %s run %d (load %.2f): %s\n", w.c_str(), f.transport.c_str(),
                f.run + 1, f.load, f.why.c_str());
      }
    }
    for (const auto& n : notes_) {
      if (n.first == w) fprintf(out, "%-22s note: %s\n", w.c_str(), n.second.c_str());
    }
  };
  std::string current;
  for (const Row& r : rows_) {
    if (r.workload != current) {
      if (!current.empty()) print_workload_tail(current);
      current = r.workload;
      done.insert(current);
    }
    const auto get = [&](const char* t) {
      auto it = r.by_transport.find(t);
      return it == r.by_transport.end() ? Spread{} : SpreadOf(it->second.values);
    };
    std::map<std::string, std::vector<double>> loads;
    for (const auto& [t, f] : r.by_transport) loads[t] = f.loads;
    const Spread san = get("san"), tcp = get("tcp"), load = LoadsOf(loads);
    const std::string metric = r.metric + " (" + r.unit + ")";
    fprintf(out, "%-22s %-18s %-30s %-30s %8s  %s..%s\n", r.workload.c_str(), metric.c_str(),
            Cell(san).c_str(), Cell(tcp).c_str(), Ratio(san, tcp).c_str(), Num(load.min).c_str(),
            Num(load.max).c_str());
  }
  if (!current.empty()) print_workload_tail(current);
  // Workloads whose every run failed have no rows: their failures and notes still show.
  std::set<std::string> rest;
  for (const Failure& f : failures_) {
    if (!done.count(f.workload)) rest.insert(f.workload);
  }
  for (const auto& n : notes_) {
    if (!done.count(n.first)) rest.insert(n.first);
  }
  for (const std::string& w : rest) print_workload_tail(w);
}

bool Summary::WriteCsv(const std::string& path, const std::string& runs_path) const {
  if (!path.empty()) {
    std::ifstream probe(path);
    const bool fresh = !probe.good() || probe.peek() == std::ifstream::traits_type::eof();
    std::ofstream csv(path, std::ios::app);
    if (!csv) return false;
    if (fresh) {
      csv << "workload,metric,unit,san_median,san_min,san_max,san_runs,tcp_median,tcp_min,"
             "tcp_max,tcp_runs,ratio,load_min,load_max,note\n";
    }
    for (const Row& r : rows_) {
      auto get = [&](const char* t) {
        auto it = r.by_transport.find(t);
        return it == r.by_transport.end() ? Spread{} : SpreadOf(it->second.values);
      };
      std::map<std::string, std::vector<double>> loads;
      for (const auto& [t, f] : r.by_transport) loads[t] = f.loads;
      const Spread san = get("san"), tcp = get("tcp"), load = LoadsOf(loads);
      std::string ratio = Ratio(san, tcp);
      if (!ratio.empty() && ratio.back() == 'x') ratio.pop_back();
      csv << r.workload << ',' << r.metric << ',' << r.unit << ',' << Num(san.median) << ','
          << Num(san.min) << ',' << Num(san.max) << ',' << san.runs << ',' << Num(tcp.median)
          << ',' << Num(tcp.min) << ',' << Num(tcp.max) << ',' << tcp.runs << ',' << ratio << ','
          << Num(load.min) << ',' << Num(load.max) << ",\n";
    }
    for (const Failure& f : failures_) {
      std::string why = f.why;
      std::replace(why.begin(), why.end(), ',', ';');
      csv << f.workload << ",FAILED," << f.transport << ",,,,,,,,,,,," << "run " << f.run + 1
          << ": " << why << '\n';
    }
    for (const auto& [w, text] : notes_) {
      std::string t = text;
      std::replace(t.begin(), t.end(), ',', ';');
      csv << w << ",note,,,,,,,,,,,,," << t << '\n';
    }
    if (!csv) return false;
  }
  if (!runs_path.empty()) {
    std::ifstream probe(runs_path);
    const bool fresh = !probe.good() || probe.peek() == std::ifstream::traits_type::eof();
    std::ofstream csv(runs_path, std::ios::app);
    if (!csv) return false;
    if (fresh) csv << "workload,metric,unit,transport,run,value,load1\n";
    for (const RunFigure& f : runs_) {
      csv << f.workload << ',' << f.metric << ',' << f.unit << ',' << f.transport << ','
          << f.run + 1 << ',' << f.value << ',' << f.load << '\n';
    }
    if (!csv) return false;
  }
  return true;
}

}  // namespace san::connbench
