// The server skeleton (-m, or -s nettype): per program version a dispatch function that decodes the
// arguments, calls the user's `proc_V_svc`, sends the reply and frees the arguments (and, with -M,
// the results through the user's `prog_V_freeresult`); and a main() that serves every version.
//
// main() (ours, not rpcgen's legacy svcudp/svctcp one): registers every version with rpcbind
// through svc_create() for each nettype: those given to rpcgen_via with -s, else "udp" and "tcp";
// at run time `-s nettype` (repeatable) replaces that list. With RPCGEN_VIA_TRANSPORT defined, the
// default list starts with "via" (the hook for librpcvia, whose svc_create handles that nettype).
// With -I, a server started by inetd (fd 0 a socket) serves fd 0 instead; -K sets the idle time
// after which it exits.
// Thread-safety: a pure function of its context.
#pragma once

#include <string>

#include "rpcgen_via/emit_context.h"

namespace san::rpcgen {

// `with_main` false (-m): the dispatch functions only, for a main() of the user's.
std::string EmitServer(const EmitContext& c, bool with_main);

}  // namespace san::rpcgen
