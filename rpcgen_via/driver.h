// The compiler pipeline behind main(): for each output file, preprocess the input with that
// output's RPC_* symbol, parse, check, emit; then write every file. Outputs are written only when
// all of them were generated, each through a temporary file renamed into place, so an error never
// leaves a half-written or clobbered file. Diagnostics go to `err` as file:line:column: error: ...
// Thread-safety: one run at a time per process (it may read standard input).
#pragma once

#include <cstdio>
#include <string>

#include "rpcgen_via/ast.h"
#include "rpcgen_via/options.h"

namespace san::rpcgen {

// Runs the compiler; returns the process exit status (0 success, 1 error).
int RunCompiler(const Options& options, FILE* err);

// Preprocessed text -> checked Specification; the front end shared by the driver and the tests.
bool CompileText(const std::string& text, const std::string& file, bool newstyle,
                 Specification* spec, Diagnostic* error);

}  // namespace san::rpcgen
