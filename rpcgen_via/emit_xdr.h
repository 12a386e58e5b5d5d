// The XDR routines (-c): one `bool_t xdr_T(XDR *, T *)` per enum, struct, union and typedef (and
// per -N argument structure), encoding exactly what the system rpcgen's routines encode, through
// the same libtirpc primitives (xdr_int, xdr_array, xdr_pointer, ...). No inline IXDR_ fast path:
// the bytes are the same, the code simpler.
// Thread-safety: a pure function of its context.
#pragma once

#include <string>

#include "rpcgen_via/emit_context.h"

namespace san::rpcgen {

std::string EmitXdr(const EmitContext& c);

}  // namespace san::rpcgen
