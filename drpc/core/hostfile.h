// Host files (--hostfile): the nodes of a cluster, one or more targets per line, separated by
// blanks; '#' starts a comment. pdsh/genders-style lists without the ranges.
//
// Pure text logic, outside input: unit-tested and fuzzed. Thread-safety: stateless.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "drpc/core/target.h"
#include "sanlib/common/status.h"

namespace san::drpc {

// Parses every entry with ParseTarget. On failure *error_line is the 1-based line of the first
// bad entry (0 if the failure is not a line's).
Result<std::vector<Target>> ParseHostFile(std::string_view text, int* error_line);

// "a,b,c" (--hosts); empty items are an error, as is a duplicate target.
Result<std::vector<Target>> ParseHostList(std::string_view list);

// Rejects the same node named twice (same scheme, host and port).
Status CheckUnique(const std::vector<Target>& targets);

}  // namespace san::drpc
