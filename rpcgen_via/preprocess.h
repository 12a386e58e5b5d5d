// Runs the C preprocessor over a .x file, as rpcgen does, so `#include`, `#define` and `#ifdef
// RPC_HDR` work: `cpp -C -D<kind> -D<user defines> file`. Comments are kept (-C) because `%` lines
// may contain them; the lexer skips the rest. Line markers in the output let diagnostics name the
// user's file and line.
// Thread-safety: spawns a child process per call; no shared state.
#pragma once

#include <string>
#include <vector>

namespace san::rpcgen {

struct PreprocessRequest {
  std::string cpp_dir;               // -Y: directory holding `cpp`; "" = find cpp on PATH
  std::vector<std::string> defines;  // "NAME" or "NAME=VALUE", without -D
  std::string input;                 // path of the .x file
};

// Returns true with cpp's output in *output; false with a message in *error (cpp missing, cpp
// failed: its own messages went to our standard error).
bool Preprocess(const PreprocessRequest& request, std::string* output, std::string* error);

}  // namespace san::rpcgen
