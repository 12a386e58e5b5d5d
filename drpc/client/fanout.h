// FanOut: one call per node, at most `parallel` at once, each on its own thread; the results come
// back in the order the nodes were given, whatever order they finished in.
// Thread-safety: `call` runs concurrently for different nodes and must be safe to.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "drpc/core/target.h"

namespace san::drpc {

struct HostResult {
  std::string host;  // the target as written
  bool ok = false;
  std::string error;  // why not ok
  std::string json;   // the node's fields, ",\"k\":v" pairs (without braces), for --json
};

std::vector<HostResult> FanOut(const std::vector<Target>& targets, unsigned parallel,
                               const std::function<HostResult(const Target&)>& call);

}  // namespace san::drpc
