// conn-bench: command line parsing and usage (options.h).
#include "options.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "transport.h"

namespace san::connbench {
namespace {

const char kUsage[] =
    "usage: conn-bench churn|hold [options]\n"
    "  churn: connect + 1-byte echo + close in a loop, connections/s and CPU us per connection\n"
    "  hold:  N concurrent connections between two processes: fds, memory, set-up time each,\n"
    "         and one epoll_wait(0) over them all, none ready (what idle connections cost)\n"
    "Each measurement runs once per transport per run, interleaved (san, tcp, san, tcp, ...).\n"
    "options:\n"
    "  --transport LIST     san,tcp (default both; san = <san/san.h>, tcp = kernel sockets)\n"
    "  --runs N             runs per transport (default 5); medians and ranges over them\n"
    "  --clients LIST       churn: client processes at once, one measurement each (default 1,4)\n"
    "  --seconds S          churn: each client's loop (default 2)\n"
    "  --server accept|fork churn: the server echoes each connection itself (default), or\n"
    "                       fork: it forks a child per connection that echoes and exits (the\n"
    "                       accept-then-fork server: inetd nowait, PostgreSQL, socat fork)\n"
    "  --exchange echo|none churn: a 1-byte echo per connection (default), or none: connect,\n"
    "                       wait for the server's close, close (what the connection alone costs)\n"
    "  --connections N      hold: connections held at once (default 10000)\n"
    "  --timeout S          a run not finished S s after it should have is killed, reported hung\n"
    "                       (default 30 for churn, 120 for hold)\n"
    "  --csv FILE           append the summary rows (median, range, ratio, load) to FILE\n"
    "  --runs-csv FILE      append every run's figures to FILE\n";

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool ToNumber(const char* text, double low, double high, double* value) {
  char* end = nullptr;
  const double v = strtod(text, &end);
  if (end == text || *end != '\0' || v < low || v > high) return false;
  *value = v;
  return true;
}

}  // namespace

int ParseOptions(int argc, char** argv, Options* o) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 1;
  }
  o->command = argv[1];
  if (o->command != "churn" && o->command != "hold") {
    fprintf(stderr, "conn-bench: unknown command '%s'\n%s", argv[1], kUsage);
    return 2;
  }
  for (int i = 2; i < argc; ++i) {
    const std::string name = argv[i];
    if (name == "--help" || name == "-h") {
      fputs(kUsage, stdout);
      return 1;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "conn-bench: %s needs a value\n", name.c_str());
      return 2;
    }
    const char* value = argv[++i];
    double number = 0;
    bool ok = true;
    if (name == "--transport" || name == "--transports") {
      o->transports = Split(value);
      for (const std::string& t : o->transports) ok = ok && FindCalls(t) != nullptr;
      ok = ok && !o->transports.empty();
    } else if (name == "--runs") {
      ok = ToNumber(value, 1, 1000, &number);
      o->runs = static_cast<int>(number);
    } else if (name == "--clients") {
      o->clients.clear();
      for (const std::string& c : Split(value)) {
        ok = ok && ToNumber(c.c_str(), 1, 256, &number);
        o->clients.push_back(static_cast<int>(number));
      }
      ok = ok && !o->clients.empty();
    } else if (name == "--seconds") {
      ok = ToNumber(value, 0.05, 3600, &o->seconds);
    } else if (name == "--exchange") {
      ok = strcmp(value, "echo") == 0 || strcmp(value, "none") == 0;
      o->echo = strcmp(value, "echo") == 0;
    } else if (name == "--server") {
      ok = strcmp(value, "accept") == 0 || strcmp(value, "fork") == 0;
      o->fork_server = strcmp(value, "fork") == 0;
    } else if (name == "--connections") {
      ok = ToNumber(value, 1, 1e7, &number);
      o->connections = static_cast<long>(number);
    } else if (name == "--timeout") {
      ok = ToNumber(value, 1, 86400, &number);
      o->timeout_s = static_cast<int>(number);
    } else if (name == "--csv") {
      o->csv = value;
    } else if (name == "--runs-csv") {
      o->runs_csv = value;
    } else {
      fprintf(stderr, "conn-bench: unknown option %s\n%s", name.c_str(), kUsage);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "conn-bench: bad value for %s: '%s'\n", name.c_str(), value);
      return 2;
    }
  }
  return 0;
}

}  // namespace san::connbench
