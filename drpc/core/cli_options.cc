#include "drpc/core/cli_options.h"

#include <boost/program_options.hpp>

#include <cmath>
#include <set>

namespace po = boost::program_options;

namespace san::drpc {
namespace {

struct CommandInfo {
  const char* name;
  Command command;
  std::set<std::string> value_options;  // options of this command that take a value
  bool argv_tail;                       // the first positional starts a command line
};

const std::vector<CommandInfo>& Commands() {
  static const std::vector<CommandInfo> kCommands = {
      {"ping", Command::kPing, {"--size", "--count"}, false},
      {"exec", Command::kExec, {"--env", "--cwd", "--cmd-timeout"}, true},
      {"status", Command::kStatus, {}, false},
      {"push", Command::kPush, {"--mode"}, false},
      {"pull", Command::kPull, {}, false},
      {"submit", Command::kSubmit, {"--env", "--cwd", "--cmd-timeout"}, true},
      {"wait", Command::kWait, {"--wait"}, false},
      {"cancel", Command::kCancel, {}, false},
  };
  return kCommands;
}

const std::set<std::string>& GlobalValueOptions() {
  static const std::set<std::string> kOptions = {
      "--hosts",      "-H",        "--hostfile",        "-f",
      "--token-file", "--timeout", "--connect-timeout", "--parallel"};
  return kOptions;
}

// "-x" or "--name" (not "-" alone, not "--"), and whether it carries its value ("--a=b").
bool IsOption(const std::string& t) { return t.size() > 1 && t[0] == '-' && t != "--"; }
std::string OptionName(const std::string& t) { return t.substr(0, t.find('=')); }

// Seconds (a decimal) to milliseconds within [min_ms, max_ms]; false if not a number or outside.
bool SecondsToMs(double s, uint32_t min_ms, uint32_t max_ms, uint32_t* out) {
  if (!std::isfinite(s)) return false;
  const double ms = s * 1000.0;
  if (ms < min_ms || ms > max_ms) return false;
  *out = static_cast<uint32_t>(ms);
  return true;
}

bool ParseUnsigned(const std::string& text, uint64_t max, int base, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else {
      return false;
    }
    if (d >= base) return false;
    if (v > (max - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) return false;
    v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  *out = v;
  return true;
}

std::string CommandTokens(const CommandInfo& info, const std::vector<std::string>& tokens,
                          std::vector<std::string>* options, std::vector<std::string>* positional) {
  size_t i = 0;
  while (i < tokens.size()) {
    const std::string& t = tokens[i];
    if (t == "--") {
      positional->insert(positional->end(), tokens.begin() + static_cast<long>(i) + 1,
                         tokens.end());
      return "";
    }
    if (IsOption(t) && !(info.argv_tail && !positional->empty())) {
      options->push_back(t);
      if (t.find('=') == std::string::npos && info.value_options.count(OptionName(t))) {
        if (i + 1 >= tokens.size()) return "option " + t + " needs a value";
        options->push_back(tokens[i + 1]);
        ++i;
      }
      ++i;
      continue;
    }
    if (info.argv_tail) {  // the command line starts here: nothing after it is ours
      positional->insert(positional->end(), tokens.begin() + static_cast<long>(i), tokens.end());
      return "";
    }
    positional->push_back(t);
    ++i;
  }
  return "";
}

std::string ParseCommand(const CommandInfo& info, const std::vector<std::string>& tokens,
                         CliOptions* o) {
  std::vector<std::string> option_tokens, positional;
  std::string error = CommandTokens(info, tokens, &option_tokens, &positional);
  if (!error.empty()) return error;

  po::options_description desc;
  double cmd_timeout_s = 0, wait_s = 30;
  std::vector<std::string> env;
  std::string mode_text = "644";
  switch (info.command) {
    case Command::kPing:
      desc.add_options()("size", po::value<uint32_t>(&o->size))("count",
                                                                po::value<uint32_t>(&o->count));
      break;
    case Command::kExec:
    case Command::kSubmit:
      desc.add_options()("env", po::value<std::vector<std::string>>(&env))(
          "cwd", po::value<std::string>(&o->cwd))("cmd-timeout", po::value<double>(&cmd_timeout_s));
      break;
    case Command::kPush:
      desc.add_options()("mode", po::value<std::string>(&mode_text))(
          "overwrite", po::bool_switch(&o->overwrite))("in-call", po::bool_switch(&o->in_call));
      break;
    case Command::kPull:
      desc.add_options()("in-call", po::bool_switch(&o->in_call));
      break;
    case Command::kWait:
      desc.add_options()("wait", po::value<double>(&wait_s));
      break;
    case Command::kStatus:
    case Command::kCancel:
      break;
  }
  po::variables_map vm;
  po::store(po::command_line_parser(option_tokens).options(desc).run(), vm);
  po::notify(vm);

  const std::string name = info.name;
  switch (info.command) {
    case Command::kPing:
      if (o->size > 4 * 1024 * 1024) return "ping: --size is at most 4194304";
      if (o->count == 0 || o->count > 1000000) return "ping: --count is 1..1000000";
      if (!positional.empty()) return "ping: unexpected argument '" + positional[0] + "'";
      break;
    case Command::kExec:
    case Command::kSubmit:
      if (positional.empty()) return name + ": no command given";
      o->argv = positional;
      for (const std::string& kv : env) {
        const size_t eq = kv.find('=');
        if (eq == 0 || eq == std::string::npos) return name + ": --env wants NAME=VALUE";
        o->env[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
      if (vm.count("cmd-timeout") && !SecondsToMs(cmd_timeout_s, 1, 86400000, &o->cmd_timeout_ms)) {
        return name + ": --cmd-timeout is 0.001..86400 seconds";
      }
      break;
    case Command::kStatus:
      if (!positional.empty()) return "status: unexpected argument '" + positional[0] + "'";
      break;
    case Command::kPush:
    case Command::kPull: {
      if (positional.size() != 2) {
        return name +
               (info.command == Command::kPush ? ": wants LOCAL REMOTE" : ": wants REMOTE LOCAL");
      }
      o->local = positional[info.command == Command::kPush ? 0 : 1];
      o->remote = positional[info.command == Command::kPush ? 1 : 0];
      uint64_t mode = 0;
      if (!ParseUnsigned(mode_text, 07777, 8, &mode)) return "push: --mode is octal, 0..7777";
      o->mode = static_cast<uint32_t>(mode);
      break;
    }
    case Command::kWait:
    case Command::kCancel:
      if (positional.size() != 1) return name + ": wants one TASK_ID";
      if (!ParseUnsigned(positional[0], UINT64_MAX, 10, &o->task_id) || o->task_id == 0) {
        return name + ": TASK_ID is a positive number";
      }
      if (vm.count("wait") && !SecondsToMs(wait_s, 0, 3600000, &o->wait_ms)) {
        return "wait: --wait is 0..3600 seconds";
      }
      break;
  }
  return "";
}

}  // namespace

const char* CommandName(Command c) {
  for (const CommandInfo& info : Commands()) {
    if (info.command == c) return info.name;
  }
  return "?";
}

const char* CliUsage() {
  return "usage: drpc (--hosts N1,N2,.. | --hostfile F) [options] COMMAND [command options] "
         "[args]\n"
         "  nodes: san://host[:port] (gRPC over SAN sockets) or host[:port] (kernel TCP), port "
         "7467\n"
         "options:\n"
         "  -H, --hosts LIST        comma-separated nodes\n"
         "  -f, --hostfile FILE     nodes, blank-separated, '#' comments\n"
         "  --token-file FILE       the shared token (default $DRPC_TOKEN_FILE)\n"
         "  --json                  one JSON object on stdout instead of host-prefixed lines\n"
         "  --timeout S             per-call deadline in seconds (default 30)\n"
         "  --connect-timeout S     per-node connection set-up (default 3)\n"
         "  --parallel N            nodes called at once (default 64)\n"
         "commands:\n"
         "  ping   [--size BYTES] [--count N]            round trips, mean and p99\n"
         "  exec   [--env K=V].. [--cwd DIR] [--cmd-timeout S] [--] ARGV..\n"
         "  status                                      hostname, uptime, load, memory, transport\n"
         "  push   [--mode OCTAL] [--overwrite] [--in-call] LOCAL REMOTE\n"
         "  pull   [--in-call] REMOTE LOCAL             several nodes: LOCAL.<node>\n"
         "         (the bytes go on a data connection of their own; --in-call: in the call's\n"
         "         messages, as any gRPC client does)\n"
         "  submit [--env K=V].. [--cwd DIR] [--cmd-timeout S] [--] ARGV..   queue a task\n"
         "  wait   [--wait S] TASK_ID                   wait for a task, print its output\n"
         "  cancel TASK_ID\n"
         "exit status: 0 all nodes succeeded, 1 some node failed, 2 usage error\n";
}

CliParse ParseCli(const std::vector<std::string>& args) {
  CliParse r;
  CliOptions& o = r.options;
  size_t i = 0;
  std::vector<std::string> global;
  while (i < args.size()) {
    const std::string& t = args[i];
    if (t == "--help" || t == "-h") {
      r.help = true;
      return r;
    }
    if (!IsOption(t)) break;
    global.push_back(t);
    const bool takes_value = GlobalValueOptions().count(OptionName(t)) > 0;
    const bool short_joined = t.size() > 2 && t[1] != '-';  // "-Hn1,n2"
    if (takes_value && t.find('=') == std::string::npos && !short_joined) {
      if (i + 1 >= args.size()) {
        r.error = "option " + t + " needs a value";
        return r;
      }
      global.push_back(args[i + 1]);
      ++i;
    }
    ++i;
  }
  if (i >= args.size()) {
    r.error = "no command given";
    return r;
  }
  const CommandInfo* info = nullptr;
  for (const CommandInfo& c : Commands()) {
    if (args[i] == c.name) info = &c;
  }
  if (!info) {
    r.error = "unknown command '" + args[i] + "'";
    return r;
  }
  o.command = info->command;
  try {
    po::options_description desc;
    double timeout_s = 30, connect_timeout_s = 3;
    desc.add_options()("hosts,H", po::value<std::string>(&o.hosts))(
        "hostfile,f", po::value<std::string>(&o.hostfile))(
        "token-file", po::value<std::string>(&o.token_file))("json", po::bool_switch(&o.json))(
        "timeout", po::value<double>(&timeout_s))(
        "connect-timeout", po::value<double>(&connect_timeout_s))("parallel",
                                                                  po::value<uint32_t>(&o.parallel));
    po::variables_map vm;
    po::store(po::command_line_parser(global).options(desc).run(), vm);
    po::notify(vm);
    if (o.hosts.empty() == o.hostfile.empty()) {
      r.error = "give the nodes with exactly one of --hosts and --hostfile";
      return r;
    }
    if (!SecondsToMs(timeout_s, 1, 86400000, &o.timeout_ms)) {
      r.error = "--timeout is 0.001..86400 seconds";
      return r;
    }
    if (!SecondsToMs(connect_timeout_s, 1, 600000, &o.connect_timeout_ms)) {
      r.error = "--connect-timeout is 0.001..600 seconds";
      return r;
    }
    if (o.parallel == 0 || o.parallel > 4096) {
      r.error = "--parallel is 1..4096";
      return r;
    }
    r.error = ParseCommand(
        *info, std::vector<std::string>(args.begin() + static_cast<long>(i) + 1, args.end()), &o);
  } catch (const std::exception& e) {  // Boost reports bad options and values by exception
    r.error = e.what();
  }
  return r;
}

}  // namespace san::drpc
