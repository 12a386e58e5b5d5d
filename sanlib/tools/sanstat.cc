// sanstat: lists this host's SAN sockets (like ss / smcss): pid, fd, addresses, mode (shm, verbs
// or tcp), why a socket fell back to TCP, bytes, send credits. Only processes of our uid answer
// (all, for root). Scope: this network namespace (another namespace is another host).
#include <getopt.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "sanlib/tools/stat_report.h"

namespace {

void Usage(FILE* out) {
  fprintf(out,
          "usage: sanstat [-a] [-l] [-p PID] [--json]\n"
          "  -a, --all        connections and listening sockets (default: connections)\n"
          "  -l, --listening  listening sockets only\n"
          "  -p, --pid PID    only this process\n"
          "      --json       one JSON object per socket, one per line\n"
          "  -h, --help\n");
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  bool all = false, listening = false, json = false;
  int only_pid = 0;
  static const option kOptions[] = {
      {"all", no_argument, nullptr, 'a'},       {"listening", no_argument, nullptr, 'l'},
      {"pid", required_argument, nullptr, 'p'}, {"json", no_argument, nullptr, 'j'},
      {"help", no_argument, nullptr, 'h'},      {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "alp:h", kOptions, nullptr)) != -1;) {
    switch (c) {
      case 'a':
        all = true;
        break;
      case 'l':
        listening = true;
        break;
      case 'p':
        only_pid = atoi(optarg);
        break;
      case 'j':
        json = true;
        break;
      case 'h':
        Usage(stdout);
        return 0;
      default:
        Usage(stderr);
        return 2;
    }
  }
  std::ifstream unix_table("/proc/net/unix");
  if (!unix_table) {
    perror("sanstat: /proc/net/unix");
    return 1;
  }
  std::stringstream text;
  text << unix_table.rdbuf();
  std::vector<san::tools::StatRow> rows;
  int silent = 0;
  for (int pid : san::tools::StatPids(text.str())) {
    if (only_pid && pid != only_pid) continue;
    const std::string report = san::tools::FetchReport(pid, 1000);
    if (report.empty()) {
      ++silent;  // another user's process, or one too busy to answer
      continue;
    }
    san::tools::ParseReport(report, &rows);
  }
  if (!json) {
    printf("%-7s %-12s %4s %-6s %-4s %-22s %-22s %12s %12s %4s %-10s %s\n", "PID", "COMMAND", "FD",
           "ROLE", "MODE", "LOCAL", "PEER", "SENT", "RECEIVED", "CRED", "PHASE", "FALLBACK");
  }
  for (const auto& r : rows) {
    const bool is_listen = r.role == "listen";
    if (listening ? !is_listen : (!all && is_listen)) continue;
    if (json) {
      printf(
          "{\"pid\":%d,\"command\":%s,\"fd\":%d,\"role\":%s,\"mode\":%s,\"local\":%s,"
          "\"peer\":%s,\"bytes_sent\":%llu,\"bytes_received\":%llu,\"credits\":%u,\"mtu\":%u,"
          "\"phase\":%s,\"fallback\":%s}\n",
          r.pid, JsonString(r.comm).c_str(), r.fd, JsonString(r.role).c_str(),
          JsonString(r.mode).c_str(), JsonString(r.local).c_str(), JsonString(r.peer).c_str(),
          static_cast<unsigned long long>(r.bytes_sent),
          static_cast<unsigned long long>(r.bytes_received), r.credits, r.mtu,
          JsonString(r.phase).c_str(), JsonString(r.reason).c_str());
    } else {
      printf("%-7d %-12s %4d %-6s %-4s %-22s %-22s %12llu %12llu %4u %-10s %s\n", r.pid,
             r.comm.c_str(), r.fd, r.role.c_str(), r.mode.c_str(), r.local.c_str(), r.peer.c_str(),
             static_cast<unsigned long long>(r.bytes_sent),
             static_cast<unsigned long long>(r.bytes_received), r.credits, r.phase.c_str(),
             r.reason.c_str());
    }
  }
  if (silent && !json) fprintf(stderr, "sanstat: %d process(es) did not answer\n", silent);
  return 0;
}
