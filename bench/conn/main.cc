// conn-bench: the connection benchmark of issue 17 (docs/bench.md, "conn-bench"). Runs the churn
// (connect + echo + close per second) or hold (many connections at once) workload over sanlib and
// over kernel TCP, interleaved run by run, and prints medians, ranges and SAN/TCP ratios with the
// load average beside them. A program that prints figures: a slow machine is never an error; a
// failed or hung run is printed as FAILED, and makes the exit status 1.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <string>

#include "churn.h"
#include "hold.h"
#include "options.h"
#include "proc_stats.h"
#include "summary.h"
#include "transport.h"

namespace san::connbench {
namespace {

void Header(const Options& o) {
  char host[256] = "?";
  gethostname(host, sizeof host);
  printf(
      "conn-bench %s: %s, %ld CPUs online, load average %.2f; %d runs per transport, "
      "interleaved",
      o.command.c_str(), host, sysconf(_SC_NPROCESSORS_ONLN), LoadAverage1(), o.runs);
  for (const std::string& t : o.transports) printf(" %s", t.c_str());
  printf("\n");
}

// churn: one workload per client count.
bool Churn(const Options& o, Summary* summary) {
  bool all_ok = true;
  for (int clients : o.clients) {
    const std::string workload = "churn c=" + std::to_string(clients) +
                                 (o.fork_server ? " fork" : "") + (o.echo ? "" : " bare");
    ChurnParams params;
    params.clients = clients;
    params.echo = o.echo;
    params.fork_server = o.fork_server;
    params.seconds = o.seconds;
    if (o.timeout_s > 0) params.timeout_s = o.timeout_s;
    for (int run = 0; run < o.runs; ++run) {
      for (const std::string& t : o.transports) {
        const Calls& calls = *FindCalls(t);
        const double load = LoadAverage1();
        const ChurnResult r = RunChurn(calls, params);
        fprintf(stderr,
                "%s %s run %d: %.0f conn/s, %.1f us CPU/conn, %ld conns (%ld on shm), %ld errors, "
                "load %.2f%s%s\n",
                workload.c_str(), t.c_str(), run + 1, r.per_second, r.cpu_us_per_conn,
                r.connections, r.shm, r.errors, load, r.failed ? ", FAILED: " : "",
                r.failed ? r.failure.c_str() : "");
        if (r.failed) {
          all_ok = false;
          summary->AddFailure(workload, t, run,
                              r.failure + (r.first_error.empty() ? "" : " (" + r.first_error + ")"),
                              load);
          continue;
        }
        summary->Add(workload, "conn/s", "1/s", t, run, r.per_second, load);
        summary->Add(workload, "cpu/conn", "us", t, run, r.cpu_us_per_conn, load);
        summary->Add(workload, "errors", "count", t, run, static_cast<double>(r.errors), load);
        if (t == "san") {
          summary->Add(workload, "on shm", "%", t, run, 100.0 * r.shm / r.connections, load);
        }
        if (r.errors > 0) all_ok = false;
        if (!r.first_error.empty()) summary->AddNote(workload, t + ": " + r.first_error);
      }
    }
  }
  return all_ok;
}

bool Hold(const Options& o, Summary* summary) {
  bool all_ok = true;
  const std::string workload = "hold n=" + std::to_string(o.connections);
  HoldParams params;
  params.connections = o.connections;
  if (o.timeout_s > 0) params.timeout_s = o.timeout_s;
  for (int run = 0; run < o.runs; ++run) {
    for (const std::string& t : o.transports) {
      const double load = LoadAverage1();
      const HoldResult r = RunHold(*FindCalls(t), params);
      fprintf(stderr,
              "%s %s run %d: %ld/%ld held (%ld on shm), %ld errors, set-up %.3f s, "
              "%.2f fds, %.1f KiB Pss + %.1f KiB slab per conn, load %.2f%s%s\n",
              workload.c_str(), t.c_str(), run + 1, r.established, r.wanted, r.shm, r.errors,
              r.establish_s, r.fds_per_conn, r.pss_kib_per_conn, r.slab_kib_per_conn, load,
              r.failed ? ", FAILED: " : "", r.failed ? r.failure.c_str() : "");
      if (!r.note.empty()) summary->AddNote(workload, t + ": " + r.note);
      if (r.failed) {
        all_ok = false;
        summary->AddFailure(workload, t, run, r.failure, load);
        continue;
      }
      if (r.errors > 0 || r.established < r.wanted) all_ok = false;
      summary->Add(workload, "held", "conns", t, run, static_cast<double>(r.established), load);
      summary->Add(workload, "errors", "count", t, run, static_cast<double>(r.errors), load);
      if (t == "san") {
        summary->Add(workload, "on shm", "%", t, run, 100.0 * r.shm / r.established, load);
      }
      summary->Add(workload, "set-up", "s", t, run, r.establish_s, load);
      summary->Add(workload, "set-up/conn", "us", t, run, 1e6 * r.establish_s / r.established,
                   load);
      summary->Add(workload, "echo all", "s", t, run, r.echo_s, load);
      summary->Add(workload, "close all", "s", t, run, r.close_s, load);
      summary->Add(workload, "fds/conn", "fds", t, run, r.fds_per_conn, load);
      summary->Add(workload, "rss/conn", "KiB", t, run, r.rss_kib_per_conn, load);
      summary->Add(workload, "pss/conn", "KiB", t, run, r.pss_kib_per_conn, load);
      summary->Add(workload, "shmem/conn", "KiB", t, run, r.shmem_kib_per_conn, load);
      summary->Add(workload, "slab/conn", "KiB", t, run, r.slab_kib_per_conn, load);
      summary->Add(workload, "conns/GiB", "1/GiB", t, run, r.conns_per_gib, load);
      summary->Add(workload, "cpu/conn", "us", t, run, r.cpu_us_per_conn, load);
      if (r.idle_wait_us >= 0) {
        summary->Add(workload, "epoll_wait idle", "us", t, run, r.idle_wait_us, load);
      } else {
        summary->AddNote(workload, t + ": epoll_wait idle not measured (a connection was ready, "
                                       "or the set could not be made)");
      }
    }
  }
  return all_ok;
}

}  // namespace
}  // namespace san::connbench

int main(int argc, char** argv) {
  using namespace san::connbench;
  Options options;
  if (const int parsed = ParseOptions(argc, argv, &options); parsed != 0)
    return parsed == 1 ? 0 : 2;
  signal(SIGPIPE, SIG_IGN);
  Header(options);
  Summary summary;
  const bool ok = options.command == "churn" ? Churn(options, &summary) : Hold(options, &summary);
  summary.Print(stdout);
  printf(
      "SAN/TCP: ratio of the medians (rates: >1 favours SAN; costs: <1 favours SAN). "
      "load1: 1-minute load average before each run, min..max.\n");
  if (!summary.WriteCsv(options.csv, options.runs_csv)) {
    fprintf(stderr, "conn-bench: could not write %s\n", options.csv.c_str());
    return 1;
  }
  return ok ? 0 : 1;
}
