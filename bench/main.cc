// san-bench: the toolkit's benchmark. `san-bench latency` (ping-pong) and `san-bench bandwidth`
// (streaming) measure the raw shm provider, sanlib, kernel TCP over loopback and Unix stream
// sockets in the same run, in spin and blocking modes, and print them side by side with ratios
// (DESIGN.md "Measuring"). See docs/bench.md.
//
// This process only coordinates: every figure comes from two fresh child processes (runner.h), so
// nothing here ever calls into sanlib or a provider.
#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "machine.h"
#include "options.h"
#include "report.h"
#include "runner.h"
#include "sanlib/common/clock.h"
#include "transport.h"

namespace san::bench {
namespace {

struct Variant {
  std::string row;        // name in the results
  std::string transport;  // MakeTransport name
  bool nodelay;
};

bool Contains(const std::vector<Variant>& v, const std::string& row) {
  for (const Variant& x : v) {
    if (x.row == row) return true;
  }
  return false;
}

// The runs behind the requested transports. Latency: TCP_NODELAY on tcp and sanlib. Bandwidth:
// sanlib twice (TCP_NODELAY, and default combining as "sanlib-combine"), tcp twice (Nagle on, and
// TCP_NODELAY as "tcp-nodelay"), so each SAN variant has its like among the kernel's.
bool Expand(const Options& o, std::vector<Variant>* out, std::string* error) {
  const bool latency = o.kind == Kind::kLatency;
  for (const std::string& t : o.transports) {
    std::vector<Variant> add;
    if (t == "raw-shm") {
      add = {{"raw-shm", "raw-shm", false}};
    } else if (t == "sanlib") {
      add = {{"sanlib", "sanlib", true}};
      if (!latency) add.push_back({"sanlib-combine", "sanlib", false});
    } else if (t == "sanlib-combine") {
      if (latency) {
        *error = "sanlib-combine is a bandwidth variant";
        return false;
      }
      add = {{"sanlib-combine", "sanlib", false}};
    } else if (t == "tcp") {
      add = {{"tcp", "tcp", latency}};
      if (!latency) add.push_back({"tcp-nodelay", "tcp", true});
    } else if (t == "tcp-nodelay") {
      if (latency) {
        *error = "tcp-nodelay is a bandwidth variant";
        return false;
      }
      add = {{"tcp-nodelay", "tcp", true}};
    } else {
      add = {{"unix", "unix", false}};
    }
    for (const Variant& v : add) {
      if (!Contains(*out, v.row)) out->push_back(v);
    }
  }
  return true;
}

std::string Join(const std::vector<uint32_t>& sizes) {
  std::string s;
  for (uint32_t size : sizes) s += (s.empty() ? "" : ", ") + SizeLabel(size);
  return s;
}

std::vector<std::string> Header(const Options& o, const Machine& m, const CpuPlacement& cpus) {
  const bool latency = o.kind == Kind::kLatency;
  std::vector<std::string> h;
  h.push_back(latency ? "san-bench latency: ping-pong between two processes; one-way latency = "
                        "round trip / 2"
                      : "san-bench bandwidth: one process streams to another; GB/s = bytes / "
                        "time, timed by the receiver");
  h.push_back("machine: " + Summary(m));
  if (cpus.pinned()) {
    h.push_back("processes: server on cpu" + std::to_string(cpus.server) + ", client on cpu" +
                std::to_string(cpus.client) +
                " (sched_setaffinity), fresh pair per transport "
                "and mode");
  } else {
    h.push_back(
        "processes: NOT pinned -- only one CPU is available, so spin mode measures the "
        "scheduler's time slices, not the transports");
  }
  std::string per_point;
  if (o.schedule.iters > 0) {
    per_point = std::to_string(o.schedule.iters) + (latency ? " round trips" : " messages") +
                " per point after " +
                std::to_string(std::max<uint64_t>(o.schedule.iters / 10, 16)) + " of warm-up";
  } else {
    char buf[96];
    snprintf(buf, sizeof buf, "about %.2g s per point after a probe and a %.2g s warm-up",
             o.schedule.seconds, o.schedule.seconds / 10);
    per_point = buf;
  }
  h.push_back("settings: " + per_point + "; sizes " + Join(o.sizes));
  h.push_back(std::string("spin: SAN_SPIN_US=") + SpinUsFor(Mode::kSpin) +
              ", kernel sockets busy-polled (MSG_DONTWAIT loops), raw shm polls; block: "
              "SAN_SPIN_US=" +
              SpinUsFor(Mode::kBlock) + ", blocking calls, raw shm sleeps on its doorbell");
  h.push_back(latency ? "tcp and sanlib with TCP_NODELAY; payloads verified (every echo's stamp, "
                        "every 64th in full)"
                      : "sanlib with TCP_NODELAY, san+comb with default combining, tcp with Nagle "
                        "on; payloads verified (every 64th receive)");
  return h;
}

int Main(int argc, char** argv) {
  Options o;
  bool help = false;
  std::string error;
  if (!ParseOptions(argc, argv, &o, &help, &error)) {
    fprintf(stderr, "san-bench: %s\n\n%s", error.c_str(), UsageText());
    return 2;
  }
  if (help) {
    fputs(UsageText(), stdout);
    return 0;
  }
  std::vector<Variant> variants;
  if (!Expand(o, &variants, &error)) {
    fprintf(stderr, "san-bench: %s\n", error.c_str());
    return 2;
  }
  in_addr host;
  inet_pton(AF_INET, o.host.c_str(), &host);  // checked by ParseOptions
  SetBenchAddress(host);
  const Machine machine = DescribeMachine();
  const CpuPlacement cpus = PlaceOnTwoCpus(machine);
  ReportInfo info;
  info.kind = o.kind;
  info.header = Header(o, machine, cpus);
  const char* provider = getenv("SAN_PROVIDER");
  if (o.host != "127.0.0.1" || (provider && *provider)) {
    const bool verbs = provider && std::string(provider) == "verbs";
    std::string line = "connections on ";
    line.append(o.host)
        .append(", SAN_PROVIDER=")
        .append(provider && *provider ? provider : "auto")
        .append(" (sanlib must run on ")
        .append(verbs ? "verbs" : "shm")
        .append(")");
    info.header.push_back(line);
  }
  info.modes = o.modes;
  info.sizes = o.sizes;

  std::vector<Row> rows;
  std::vector<std::string> errors;
  const double load_before = LoadAverage();
  const uint64_t start = NowNs();
  for (Mode mode : o.modes) {
    for (const Variant& v : variants) {
      RunSpec spec;
      spec.kind = o.kind;
      spec.row_name = v.row;
      spec.transport = v.transport;
      spec.nodelay = v.nodelay;
      spec.mode = mode;
      spec.sizes = o.sizes;
      spec.schedule = o.schedule;
      spec.cpus = cpus;
      spec.stall_timeout_s = o.stall_timeout_s;
      fprintf(stderr, "san-bench: %s %-5s %-14s ", KindName(o.kind), ModeName(mode), v.row.c_str());
      RunOutcome outcome = RunPair(spec);
      uint64_t preemptions = 0;
      for (const Row& r : outcome.rows) preemptions += r.preemptions;
      fprintf(stderr, "%zu/%zu points, %5.1f s, client preempted %llu times%s\n",
              outcome.rows.size(), o.sizes.size(), outcome.seconds,
              static_cast<unsigned long long>(preemptions),
              outcome.errors.empty() ? "" : " FAILED");
      rows.insert(rows.end(), outcome.rows.begin(), outcome.rows.end());
      errors.insert(errors.end(), outcome.errors.begin(), outcome.errors.end());
    }
  }
  const double total = (NowNs() - start) / 1e9;
  char load[160];
  snprintf(load, sizeof load,
           "load average (1 min): %.2f before, %.2f after; san-bench accounts for up to 2, "
           "anything more competed with it",
           load_before, LoadAverage());
  info.header.insert(info.header.begin() + 3, load);

  PrintReport(stdout, info, rows);
  printf("total: %.1f s for %zu points\n", total, rows.size());
  fflush(stdout);

  bool write_failed = false;
  if (!o.json_path.empty()) {
    if (Status st = WriteJson(o.json_path, rows); !st.ok()) {
      fprintf(stderr, "san-bench: %s: %s\n", o.json_path.c_str(), st.ToString().c_str());
      write_failed = true;
    }
  }
  if (!o.csv_path.empty()) {
    if (Status st = WriteCsv(o.csv_path, rows); !st.ok()) {
      fprintf(stderr, "san-bench: %s: %s\n", o.csv_path.c_str(), st.ToString().c_str());
      write_failed = true;
    }
  }
  if (!o.plot_path.empty()) {
    std::string message;
    if (!WritePlot(o.plot_path, info, rows, &message)) {
      fprintf(stderr, "san-bench: plot: %s\n", message.c_str());
    }
  }
  for (const std::string& e : errors) fprintf(stderr, "san-bench: ERROR: %s\n", e.c_str());
  return errors.empty() && !write_failed ? 0 : 1;
}

}  // namespace
}  // namespace san::bench

int main(int argc, char** argv) { return san::bench::Main(argc, argv); }
