// What every emitter needs: the parsed file, its C type mapping, the generation options, and the
// naming rules the system rpcgen uses for generated functions (so user code written for rpcgen's
// output links against ours unchanged).
//
// Thread-safety: immutable while emitters run. Does not own the Specification.
#pragma once

#include <string>
#include <vector>

#include "rpcgen_via/ast.h"
#include "rpcgen_via/c_types.h"
#include "rpcgen_via/code_writer.h"

namespace san::rpcgen {

struct EmitOptions {
  std::string base;                   // input file name without directory and ".x": "features"
  std::string header_name;            // what generated .c files #include: "features.h"
  bool mt_safe = false;               // -M: results in caller storage, no statics
  bool newstyle = false;              // -N: arguments by value, several arguments
  bool inetd = false;                 // -I: the server also runs under inetd (fd 0 is its socket)
  int closedown_seconds = -1;         // -K: exit after this much inactivity; -1 = never
  bool syslog_errors = false;         // -L: server errors to syslog
  std::vector<std::string> nettypes;  // -s: the server's default transports ("udp", "tcp" if none)
  std::string invocation = "rpcgen_via";  // recorded in the Makefile template

  // -s via was given: the generated code needs librpcvia (RPCGEN_VIA_TRANSPORT, -lrpcvia).
  bool uses_via() const;
};

struct EmitContext {
  const Specification& spec;
  const CTypes& types;
  const EmitOptions& options;
};

// "add_1": the client stub of procedure ADD in version 1 (the number as written, lower-cased name).
std::string StubName(const Procedure& p, const Version& v);
// "features_prog_1": the server dispatch function of a program version.
std::string DispatchName(const Definition& program, const Version& v);
// "two_1_argument": the structure carrying several -N arguments.
std::string ArgumentStructName(const Procedure& p, const Version& v);

// The -N parameters of a procedure, "point arg1, char *arg2, " (each followed by ", "), as both
// client stub and server function take them; empty when the argument is void.
std::string NewstyleParams(const EmitContext& c, const Procedure& p);
// The C type of a procedure's argument i / result: "point", "char *" for string, "void".
std::string ArgCType(const EmitContext& c, const Procedure& p, size_t i);
std::string ResultCType(const EmitContext& c, const Procedure& p);
// The XDR routine of the argument as sent on the wire (the argument struct when there are several).
std::string ArgXdrProc(const EmitContext& c, const Procedure& p, const Version& v);
std::string ResultXdrProc(const EmitContext& c, const Procedure& p);
// "point" -> "point *", "char *" -> "char **": a pointer to a C type, spelled as rpcgen does.
std::string PointerTo(const std::string& ctype);
// "point" -> "point ", "char *" -> "char *": a C type ready to be followed by a name.
std::string Spaced(const std::string& ctype);
// "(xdrproc_t) xdr_int"; xdr_void, declared without parameters by libtirpc, goes through
// void (*)(void) so -Wcast-function-type stays quiet.
std::string XdrProcCast(const std::string& proc);
bool HasVoidArg(const Procedure& p);
bool HasVoidResult(const Procedure& p);
// Several arguments, carried in an argument struct (-N only).
bool HasArgumentStruct(const Procedure& p);
// The argument struct of a -N procedure with several arguments, as an ordinary struct definition
// (members arg1, arg2, ...), so header and XDR emitters treat it like any other struct.
Definition ArgumentStruct(const Procedure& p, const Version& v);
// Every argument struct of a program, version by version, procedure by procedure (the order
// rpcgen writes them in); empty without -N procedures of several arguments.
std::vector<Definition> ArgumentStructs(const Definition& program);

// Writes the generated-file banner and the pass-through lines (all of them, for outputs whose
// content does not follow the order of definitions).
void WriteBanner(CodeWriter* out);
void WriteAllPassthrough(const EmitContext& c, CodeWriter* out);

}  // namespace san::rpcgen
