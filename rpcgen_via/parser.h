// Parser for the RPC language: tokens in, a Specification out.
//
// Recursive descent over RFC 5531 section 12 with the extensions the system rpcgen accepts (and
// real .x files use): `%` pass-through lines between definitions, enum values without `=`,
// `unsigned` alone, char/short/long, `struct foo` type references, programs with several versions
// and procedures taking several arguments (for -N). The first error stops parsing and is reported
// with its file:line:column; semantic checks that need the whole file live in checker.h.
//
// Thread-safety: pure functions. Any token sequence yields a Specification or one Diagnostic.
#pragma once

#include <string>
#include <string_view>

#include "rpcgen_via/ast.h"

namespace san::rpcgen {

// Parses preprocessed source text (see lexer.h for what it accepts). On failure returns false and
// sets *error; *spec is then unspecified.
bool Parse(std::string_view text, const std::string& file, Specification* spec, Diagnostic* error);

}  // namespace san::rpcgen
