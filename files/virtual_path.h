// Virtual paths: what a client names (an FTP argument, a drpc remote path), resolved lexically
// against a working directory into a canonical absolute path inside the root ("/", "/a/b").
//
// Pure string logic (unit-tested and fuzzed): "." and ".." are folded, ".." never climbs above
// "/", repeated slashes collapse. Symlinks are not this layer's concern: Jail (jail.h) resolves the
// canonical path in the kernel with the root as "/", so no link can point out either.
// Thread-safety: stateless.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace san::files {

// cwd must be canonical (as returned here). nullopt for an argument with a NUL byte.
std::optional<std::string> ResolveVirtual(std::string_view cwd, std::string_view arg);
// The last component of a canonical path ("" for "/") and its parent ("/" for "/x").
std::string BaseName(std::string_view canonical);
std::string DirName(std::string_view canonical);

}  // namespace san::files
