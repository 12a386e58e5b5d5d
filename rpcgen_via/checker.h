// Semantic checks over a whole parsed file, the errors the grammar alone cannot see: names defined
// twice, duplicate case labels / version / procedure numbers, several procedure arguments without
// -N. Types that are never defined are NOT errors: like rpcgen, a .x file may use types declared in
// C headers it pulls in with `%#include`.
//
// Thread-safety: a pure function.
#pragma once

#include "rpcgen_via/ast.h"

namespace san::rpcgen {

struct CheckOptions {
  bool newstyle = false;  // -N: procedures may take several arguments
};

// Returns true when the specification is acceptable; otherwise sets *error to the first problem.
bool Check(const Specification& spec, const CheckOptions& options, Diagnostic* error);

}  // namespace san::rpcgen
