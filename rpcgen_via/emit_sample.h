// The templates -a adds (also -Sc, -Ss, -Sm): a sample client calling every procedure, a sample
// server with an empty body per procedure (and, with -M, the freeresult functions), and a Makefile
// building both with libtirpc. Starting points for a user, like rpcgen's.
// Thread-safety: pure functions of their context.
#pragma once

#include <string>

#include "rpcgen_via/emit_context.h"

namespace san::rpcgen {

std::string EmitSampleClient(const EmitContext& c);
std::string EmitSampleServer(const EmitContext& c);
std::string EmitMakefile(const EmitContext& c);

}  // namespace san::rpcgen
