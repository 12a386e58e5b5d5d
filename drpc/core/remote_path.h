// Remote paths of Push and Pull: names relative to a node's file root.
//
// Checked lexically before the kernel sees them: NUL bytes, ".." components, and names longer
// than PATH_MAX are refused outright (a clear error, not a silently clamped path); "." and
// repeated slashes fold away. The result is canonical ("/a/b"), the form the file jail
// (files/jail.h) opens with openat2 RESOLVE_IN_ROOT, so a symlink inside the root cannot lead
// out of it either.
// Pure string logic, outside input: unit-tested and fuzzed. Thread-safety: stateless.
#pragma once

#include <string>
#include <string_view>

#include "sanlib/common/status.h"

namespace san::drpc {

// "a/b", "/a/b", "./a//b/" -> "/a/b". EINVAL for "", NUL, too long; EPERM for "..";
// EISDIR for a path naming the root itself ("/", ".").
Result<std::string> CanonicalRemotePath(std::string_view path);

}  // namespace san::drpc
