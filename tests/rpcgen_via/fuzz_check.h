// The property both the libFuzzer target (parser_fuzz.cc) and its GoogleTest replay
// (parser_fuzz_replay_test.cc) check on any input: the front end either accepts it, and then every
// emitter runs on it, or rejects it with a positioned, non-empty diagnostic. Never a crash.
#pragma once

#include <string>

#include "rpcgen_via/c_types.h"
#include "rpcgen_via/driver.h"
#include "rpcgen_via/emit_client.h"
#include "rpcgen_via/emit_header.h"
#include "rpcgen_via/emit_sample.h"
#include "rpcgen_via/emit_server.h"
#include "rpcgen_via/emit_xdr.h"

namespace san::rpcgen {

// Returns false when the property is violated; *accepted (optional) tells which outcome it was,
// *error the diagnostic of a rejection.
inline bool FrontEndBehaves(const std::string& text, bool newstyle, bool* accepted = nullptr,
                            Diagnostic* error_out = nullptr) {
  Specification spec;
  Diagnostic error;
  const bool ok = CompileText(text, "fuzz.x", newstyle, &spec, &error);
  if (accepted) *accepted = ok;
  if (error_out) *error_out = error;
  if (!ok) return error.pos.line >= 1 && error.pos.column >= 1 && !error.message.empty();
  CTypes types(spec);
  EmitOptions options;
  options.base = "fuzz";
  options.header_name = "fuzz.h";
  options.newstyle = newstyle;
  options.mt_safe = newstyle;
  options.inetd = newstyle;
  options.closedown_seconds = newstyle ? 10 : -1;
  EmitContext c{spec, types, options};
  size_t total = EmitHeader(c).size() + EmitXdr(c).size() + EmitClient(c).size() +
                 EmitServer(c, true).size() + EmitSampleClient(c).size() +
                 EmitSampleServer(c).size() + EmitMakefile(c).size();
  return total > 0;
}

}  // namespace san::rpcgen
