// The client stubs (-l): one function per procedure calling clnt_call() with the procedure's XDR
// routines, with rpcgen's signatures: `RES *proc_V(ARG *, CLIENT *)` (a static result, NULL on
// failure), `enum clnt_stat proc_V(ARG *, RES *, CLIENT *)` with -M, arguments by value with -N.
// The stubs take a CLIENT from the caller, so they work over any transport clnt_create() returns,
// including a future "via" one.
// Thread-safety: a pure function of its context.
#pragma once

#include <string>

#include "rpcgen_via/emit_context.h"

namespace san::rpcgen {

std::string EmitClient(const EmitContext& c);

}  // namespace san::rpcgen
