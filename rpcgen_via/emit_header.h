// The header (-h): constants, types, program/version/procedure numbers, stub and XDR prototypes.
// Names and signatures are those of the system rpcgen's header, so programs written against
// rpcgen's output compile unchanged against ours.
// Thread-safety: a pure function of its context.
#pragma once

#include <string>

#include "rpcgen_via/emit_context.h"

namespace san::rpcgen {

// "features.h" -> "_FEATURES_H_RPCGEN".
std::string HeaderGuard(const std::string& header_name);

std::string EmitHeader(const EmitContext& c);

}  // namespace san::rpcgen
