// drpc: the cluster RPC CLI (docs/drpc.md). Calls fan out to every node at once; output is
// prefixed per node (or one JSON object); the exit status is 0 only if every node succeeded.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "drpc/client/commands.h"
#include "drpc/client/fanout.h"
#include "drpc/client/output.h"
#include "drpc/core/cli_options.h"
#include "drpc/core/hostfile.h"
#include "drpc/core/token.h"
#include "drpc/transport/channel.h"
#include "drpc/transport/malloc_tuning.h"

using namespace san::drpc;

namespace {

int Usage(const std::string& error) {
  fprintf(stderr, "drpc: %s\n(drpc --help for usage)\n", error.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  san::drpc::TuneMallocForBulkTransfers();  // before gRPC starts its threads
  CliParse parse = ParseCli(std::vector<std::string>(argv + 1, argv + argc));
  if (parse.help) {
    fputs(CliUsage(), stdout);
    return 0;
  }
  if (!parse.error.empty()) return Usage(parse.error);
  const CliOptions& o = parse.options;

  std::vector<Target> targets;
  if (!o.hosts.empty()) {
    san::Result<std::vector<Target>> t = ParseHostList(o.hosts);
    if (!t.ok()) return Usage("--hosts: " + std::string(t.status().call()));
    targets = std::move(t).value();
  } else {
    std::ifstream in(o.hostfile);
    if (!in) return Usage("--hostfile " + o.hostfile + ": cannot be read");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    int line = 0;
    san::Result<std::vector<Target>> t = ParseHostFile(text, &line);
    if (!t.ok()) {
      return Usage(o.hostfile + (line ? ":" + std::to_string(line) : std::string()) + ": " +
                   t.status().call());
    }
    targets = std::move(t).value();
  }

  CallSettings settings;
  settings.timeout_ms = o.timeout_ms;
  settings.connect_timeout_ms = o.connect_timeout_ms;
  settings.many_nodes = targets.size() > 1;
  std::string token_file = o.token_file;
  if (token_file.empty()) {
    if (const char* env = getenv("DRPC_TOKEN_FILE")) token_file = env;
  }
  if (!token_file.empty()) {
    san::Result<std::string> token = LoadTokenFile(token_file);
    if (!token.ok()) return Usage("token file " + token_file + ": " + token.status().ToString());
    settings.token = std::move(token).value();
  }

  signal(SIGPIPE, SIG_IGN);
  Output out(o.json);
  std::vector<HostResult> results = FanOut(
      targets, o.parallel, [&](const Target& t) { return RunCommandOnHost(o, settings, t, &out); });

  size_t failed = 0;
  for (const HostResult& r : results) {
    if (!r.ok) {
      ++failed;
      out.Line(r.host, "error: " + r.error, true);
    }
  }
  if (o.json) {
    std::string json = "{\"command\":" + JsonString(CommandName(o.command)) +
                       ",\"ok\":" + (failed ? "false" : "true") +
                       ",\"failed\":" + std::to_string(failed) + ",\"hosts\":[";
    for (size_t i = 0; i < results.size(); ++i) {
      const HostResult& r = results[i];
      if (i) json += ",";
      json += "{\"host\":" + JsonString(r.host) + ",\"ok\":" + (r.ok ? "true" : "false");
      if (!r.ok) json += ",\"error\":" + JsonString(r.error);
      json += r.json + "}";
    }
    json += "]}\n";
    fputs(json.c_str(), stdout);
  } else if (failed && results.size() > 1) {
    fprintf(stderr, "drpc: %zu of %zu nodes failed\n", failed, results.size());
  }
  return failed ? 1 : 0;
}
