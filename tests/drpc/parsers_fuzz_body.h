// The body shared by the libFuzzer target (parsers_fuzz.cc, clang) and the seeded replay test
// (parsers_fuzz_replay_test.cc, every compiler): feeds one input to every drpc parser of outside
// input and checks what each promises, aborting on a broken promise.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "drpc/core/cli_options.h"
#include "drpc/core/command_policy.h"
#include "drpc/core/hostfile.h"
#include "drpc/core/remote_path.h"
#include "drpc/core/target.h"
#include "drpc/core/token.h"

namespace san::drpc {

inline void Require(bool ok) {
  if (!ok) abort();
}

inline void FuzzParsers(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (Result<Target> t = ParseTarget(text); t.ok()) {
    Require(!t->host.empty() && t->port != 0 && t->spec == text);
    // A parsed target written back the canonical way parses to the same node.
    const bool v6 = t->host.find_first_of(":%") != std::string::npos;
    const std::string again = std::string(t->san ? "san://" : "") + (v6 ? "[" : "") + t->host +
                              (v6 ? "]" : "") + ":" + std::to_string(t->port);
    Result<Target> u = ParseTarget(again);
    Require(u.ok() && u->host == t->host && u->port == t->port && u->san == t->san);
  }
  int line = 0;
  if (Result<std::vector<Target>> h = ParseHostFile(text, &line); h.ok()) {
    Require(!h->empty() && line == 0);
  } else {
    Require(line >= 0);
  }
  (void)ParseHostList(text);
  if (Result<CommandPolicy> p = CommandPolicy::Parse(text, &line); p.ok()) {
    for (const std::string& pattern : p->patterns()) Require(!pattern.empty());
    (void)p->Allows(text);
  }
  if (Result<std::string> path = CanonicalRemotePath(text); path.ok()) {
    const std::string& c = *path;
    Require(c.size() > 1 && c[0] == '/' && c.back() != '/');
    Require(c.find("//") == std::string::npos && c.find("/../") == std::string::npos &&
            c.find("/./") == std::string::npos && c.find('\0') == std::string::npos);
    Require(c.size() < 3 || c.compare(c.size() - 3, 3, "/..") != 0);
    Result<std::string> twice = CanonicalRemotePath(c);
    Require(twice.ok() && *twice == c);
  }
  if (Result<std::string> tok = ParseToken(text); tok.ok()) {
    Require(tok->size() >= 16 && TokenEquals(*tok, *tok));
  }
  (void)TokenFromBearer(text);
  // The command line: split on NUL bytes into arguments.
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == '\0') {
      args.emplace_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  const CliParse cli = ParseCli(args);
  if (!cli.help && cli.error.empty()) {
    Require(cli.options.hosts.empty() != cli.options.hostfile.empty());
    Require(cli.options.timeout_ms > 0 && cli.options.parallel > 0);
    const Command c = cli.options.command;
    if (c == Command::kExec || c == Command::kSubmit) Require(!cli.options.argv.empty());
    if (c == Command::kWait || c == Command::kCancel) Require(cli.options.task_id > 0);
  }
}

}  // namespace san::drpc
