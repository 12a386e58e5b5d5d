#include "rpcgen_via/emit_server.h"

#include <functional>

namespace san::rpcgen {
namespace {

bool Timed(const EmitContext& c) { return c.options.closedown_seconds >= 0; }

// -N: the dispatcher calls every procedure the same way (argument block, result, request), so a
// small adapter unpacks the argument block into the by-value parameters of the user's function.
void WriteNewstyleAdapter(const EmitContext& c, const Procedure& p, const Version& v,
                          CodeWriter* out) {
  const bool mt = c.options.mt_safe;
  const std::string arg_block = HasArgumentStruct(p) ? ArgumentStructName(p, v)
                                : HasVoidArg(p)      ? std::string("void")
                                                     : ArgCType(c, p, 0);
  const std::string result_type = mt ? std::string("bool_t") : std::string("char *");
  out->Line("static ", result_type);
  out->Line("_", StubName(p, v), " (", PointerTo(arg_block), "argp, ", mt ? "void *result, " : "",
            "struct svc_req *rqstp)");
  out->Line("{");
  out->Indent();
  std::string args;
  if (HasArgumentStruct(p)) {
    for (size_t i = 0; i < p.args.size(); ++i)
      args.append("argp->arg").append(std::to_string(i + 1)).append(", ");
  } else if (!HasVoidArg(p)) {
    args = "*argp, ";
  } else {
    out->Line("(void) argp;");
  }
  if (mt) args.append("result, ");
  out->Line("return (", mt ? "" : "(char *) ", StubName(p, v), "_svc(", args, "rqstp));");
  out->Dedent();
  out->Line("}");
  out->Line();
}

bool HasNullProc(const Version& v) {
  for (const Procedure& p : v.procedures) {
    if (p.number == "0") return true;
  }
  return false;
}

// The dispatcher's storage for arguments or results: a union with a member `<stub><suffix>` of
// type `type_of(p)` per procedure, skipping those it gives "" (void). C wants a member, so a union
// with none gets a placeholder.
void WriteProcedureUnion(const Version& v, const char* suffix, const char* name, CodeWriter* out,
                         const std::function<std::string(const Procedure&)>& type_of) {
  out->Line("union {");
  out->Indent();
  bool any = false;
  for (const Procedure& p : v.procedures) {
    const std::string t = type_of(p);
    if (t.empty()) continue;
    any = true;
    out->Line(Spaced(t), StubName(p, v), suffix, ";");
  }
  if (!any) out->Line("int unused_;");
  out->Dedent();
  out->Line("} ", name, ";");
}

// Without our main() (-m) the dispatch functions are external, for the user's main to register.
void WriteDispatch(const EmitContext& c, const Definition& prog, const Version& v, bool with_main,
                   CodeWriter* out) {
  const bool mt = c.options.mt_safe;
  const bool n = c.options.newstyle;
  if (n) {
    for (const Procedure& p : v.procedures) WriteNewstyleAdapter(c, p, v, out);
  }
  out->Line(with_main ? "static void" : "void");
  out->Line(DispatchName(prog, v), "(struct svc_req *rqstp, SVCXPRT *transp)");
  out->Line("{");
  out->Indent();
  WriteProcedureUnion(v, "_arg", "argument", out, [&](const Procedure& p) {
    if (HasVoidArg(p)) return std::string();
    return HasArgumentStruct(p) ? ArgumentStructName(p, v) : ArgCType(c, p, 0);
  });
  if (mt) {
    WriteProcedureUnion(v, "_res", "result", out, [&](const Procedure& p) {
      return HasVoidResult(p) ? std::string() : ResultCType(c, p);
    });
    out->Line("bool_t retval;");
  } else {
    out->Line("char *result;");
  }
  out->Line("xdrproc_t _xdr_argument, _xdr_result;");
  const std::string local_type = mt ? std::string("bool_t (*)(char *, void *, struct svc_req *)")
                                    : std::string("char *(*)(char *, struct svc_req *)");
  out->Line(mt ? "bool_t (*local)(char *, void *, struct svc_req *);"
               : "char *(*local)(char *, struct svc_req *);");
  out->Line();
  if (Timed(c)) out->Line("_rpcsvcstate = _SERVING;");
  out->Line("switch (rqstp->rq_proc) {");
  if (!HasNullProc(v)) {
    // Every program answers procedure 0 (RFC 5531 section 12.2), declared or not.
    out->Line("case NULLPROC:");
    out->Indent();
    out->Line("(void) svc_sendreply (transp, ", XdrProcCast("xdr_void"), ", (char *)NULL);");
    if (Timed(c)) out->Line("_rpcsvcstate = _SERVED;");
    out->Line("return;");
    out->Dedent();
    out->Line();
  }
  for (const Procedure& p : v.procedures) {
    out->Line("case ", p.name, ":");
    out->Indent();
    out->Line("_xdr_argument = ", XdrProcCast(ArgXdrProc(c, p, v)), ";");
    out->Line("_xdr_result = ", XdrProcCast(ResultXdrProc(c, p)), ";");
    out->Line("local = (", local_type, ") ", n ? "_" : "", StubName(p, v), n ? "" : "_svc", ";");
    out->Line("break;");
    out->Dedent();
    out->Line();
  }
  out->Line("default:");
  out->Indent();
  out->Line("svcerr_noproc (transp);");
  if (Timed(c)) out->Line("_rpcsvcstate = _SERVED;");
  out->Line("return;");
  out->Dedent();
  out->Line("}");
  out->Line("memset ((char *)&argument, 0, sizeof (argument));");
  out->Line("if (!svc_getargs (transp, (xdrproc_t) _xdr_argument, (caddr_t) &argument)) {");
  out->Indent();
  out->Line("svcerr_decode (transp);");
  if (Timed(c)) out->Line("_rpcsvcstate = _SERVED;");
  out->Line("return;");
  out->Dedent();
  out->Line("}");
  if (mt) {
    out->Line("retval = (bool_t) (*local)((char *)&argument, (void *)&result, rqstp);");
    out->Line(
        "if (retval > 0 && !svc_sendreply(transp, (xdrproc_t) _xdr_result, (char *)&result)) {");
  } else {
    out->Line("result = (*local)((char *)&argument, rqstp);");
    out->Line("if (result != NULL && !svc_sendreply(transp, (xdrproc_t) _xdr_result, result)) {");
  }
  out->Indent();
  out->Line("svcerr_systemerr (transp);");
  out->Dedent();
  out->Line("}");
  out->Line("if (!svc_freeargs (transp, (xdrproc_t) _xdr_argument, (caddr_t) &argument)) {");
  out->Indent();
  out->Line("_msgout (\"unable to free arguments\");");
  out->Line("exit (1);");
  out->Dedent();
  out->Line("}");
  if (mt) {
    out->Line("if (!", DispatchName(prog, v),
              "_freeresult (transp, _xdr_result, (caddr_t) &result))");
    out->Indent();
    out->Line("_msgout (\"unable to free results\");");
    out->Dedent();
  }
  if (Timed(c)) out->Line("_rpcsvcstate = _SERVED;");
  out->Line("return;");
  out->Dedent();
  out->Line("}");
  out->Line();
}

void WriteSupport(const EmitContext& c, CodeWriter* out) {
  out->Line("static void _msgout (const char *msg) __attribute__ ((unused));");
  out->Line("static void");
  out->Line("_msgout (const char *msg)");
  out->Line("{");
  out->Indent();
  if (c.options.syslog_errors) {
    out->Line("syslog (LOG_ERR, \"%s\", msg);");
  } else {
    out->Line("fprintf (stderr, \"%s\\n\", msg);");
  }
  out->Dedent();
  out->Line("}");
  out->Line();
  if (!Timed(c)) return;
  out->Line("/* Closedown: exit after _RPCSVC_CLOSEDOWN seconds without a request. */");
  out->Line("#define _RPCSVC_CLOSEDOWN ", std::to_string(c.options.closedown_seconds));
  out->Line("#define _IDLE 0");
  out->Line("#define _SERVED 1");
  out->Line("#define _SERVING 2");
  out->Line("static volatile sig_atomic_t _rpcsvcstate = _IDLE;");
  out->Line();
  out->Line("static void");
  out->Line("closedown (int sig)");
  out->Line("{");
  out->Indent();
  out->Line("(void) sig;");
  out->Line("if (_rpcsvcstate == _IDLE)");
  out->Indent();
  out->Line("_exit (0);");
  out->Dedent();
  out->Line("if (_rpcsvcstate == _SERVED)");
  out->Indent();
  out->Line("_rpcsvcstate = _IDLE;");
  out->Dedent();
  out->Line("(void) alarm (_RPCSVC_CLOSEDOWN / 2 > 0 ? _RPCSVC_CLOSEDOWN / 2 : 1);");
  out->Dedent();
  out->Line("}");
  out->Line();
  out->Line("static void");
  out->Line("_start_closedown (void)");
  out->Line("{");
  out->Indent();
  out->Line("struct sigaction sa;");
  out->Line("memset (&sa, 0, sizeof (sa));");
  out->Line("sa.sa_handler = closedown;");
  out->Line("sa.sa_flags = SA_RESTART;");
  out->Line("(void) sigaction (SIGALRM, &sa, NULL);");
  out->Line("(void) alarm (_RPCSVC_CLOSEDOWN / 2 > 0 ? _RPCSVC_CLOSEDOWN / 2 : 1);");
  out->Dedent();
  out->Line("}");
  out->Line();
}

void WriteMain(const EmitContext& c, CodeWriter* out) {
  std::vector<const Definition*> programs;
  for (const Definition& d : c.spec.definitions) {
    if (d.kind == DefKind::kProgram) programs.push_back(&d);
  }
  out->Line("int");
  out->Line("main (int argc, char **argv)");
  out->Line("{");
  out->Indent();
  std::string list;
  if (c.options.nettypes.empty()) {
    list = "\"udp\", \"tcp\", ";
  } else {
    for (const std::string& n : c.options.nettypes) list.append("\"").append(n).append("\", ");
  }
  out->Line("static const char *default_nettypes[] = {");
  if (!c.options.uses_via()) {  // -s via lists it where the user put it
    out->Line("#ifdef RPCGEN_VIA_TRANSPORT");
    out->Line("\t\"via\",");
    out->Line("#endif");
  }
  out->Line("\t", list, "NULL");
  out->Line("};");
  out->Line("const char **nettypes = default_nettypes;");
  out->Line("const char **chosen = (const char **) calloc ((size_t) argc + 1, sizeof (char *));");
  out->Line("int nchosen = 0, i;");
  out->Line();
  out->Line("/* -s nettype (repeatable) replaces the default transports. */");
  out->Line("for (i = 1; i < argc; i++) {");
  out->Indent();
  out->Line("if (strcmp (argv[i], \"-s\") == 0 && i + 1 < argc && chosen != NULL) {");
  out->Line("\tchosen[nchosen++] = argv[++i];");
  out->Line("} else {");
  out->Line("\tfprintf (stderr, \"usage: %s [-s nettype]...\\n\", argv[0]);");
  out->Line("\texit (2);");
  out->Line("}");
  out->Dedent();
  out->Line("}");
  out->Line("if (nchosen > 0)");
  out->Line("\tnettypes = chosen;");
  out->Line();
  if (c.options.inetd) {
    out->Line("/* Started by inetd: fd 0 is our socket (listening, connected or datagram). */");
    out->Line("{");
    out->Indent();
    out->Line("struct sockaddr_storage saddr;");
    out->Line("socklen_t asize = sizeof (saddr);");
    out->Line("if (getsockname (0, (struct sockaddr *)&saddr, &asize) == 0) {");
    out->Indent();
    out->Line("SVCXPRT *transp;");
    out->Line("int socktype = 0;");
    out->Line("socklen_t tsize = sizeof (socktype);");
    out->Line("struct sockaddr_storage peer;");
    out->Line("socklen_t psize = sizeof (peer);");
    out->Line(
        "/* A connected stream (inetd nowait, socket activation with Accept=yes, a socketpair)");
    out->Line(
        " * is served as is; anything else (a listening or datagram socket) through "
        "svc_tli_create. */");
    out->Line(
        "if (getsockopt (0, SOL_SOCKET, SO_TYPE, &socktype, &tsize) == 0 && socktype == "
        "SOCK_STREAM &&");
    out->Line("    getpeername (0, (struct sockaddr *)&peer, &psize) == 0)");
    out->Line("	transp = svc_fd_create (0, 0, 0);");
    out->Line("else");
    out->Line("	transp = svc_tli_create (0, NULL, NULL, 0, 0);");
    out->Line("if (transp == NULL) {");
    out->Line("\t_msgout (\"cannot create a service on fd 0.\");");
    out->Line("\texit (1);");
    out->Line("}");
    for (const Definition* p : programs) {
      for (const Version& v : p->versions) {
        out->Line("if (!svc_reg (transp, ", p->name, ", ", v.name, ", ", DispatchName(*p, v),
                  ", NULL)) {");
        out->Line("\t_msgout (\"unable to register (", p->name, ", ", v.name, ").\");");
        out->Line("\texit (1);");
        out->Line("}");
      }
    }
    if (Timed(c)) out->Line("_start_closedown ();");
    out->Line("svc_run ();");
    out->Line("_msgout (\"svc_run returned\");");
    out->Line("exit (1);");
    out->Dedent();
    out->Line("}");
    out->Dedent();
    out->Line("}");
    out->Line();
  }
  out->Line("/* Any old registration of ours would make rpcbind refuse the new one. */");
  for (const Definition* p : programs) {
    for (const Version& v : p->versions)
      out->Line("(void) rpcb_unset (", p->name, ", ", v.name, ", NULL);");
  }
  out->Line("for (i = 0; nettypes[i] != NULL; i++) {");
  out->Indent();
  for (const Definition* p : programs) {
    for (const Version& v : p->versions) {
      out->Line("if (!svc_create (", DispatchName(*p, v), ", ", p->name, ", ", v.name,
                ", nettypes[i])) {");
      out->Indent();
      out->Line("char msg[256];");
      out->Line("snprintf (msg, sizeof (msg), \"unable to create (", p->name, ", ", v.name,
                ") for %s.\", nettypes[i]);");
      out->Line("_msgout (msg);");
      out->Line("exit (1);");
      out->Dedent();
      out->Line("}");
    }
  }
  out->Dedent();
  out->Line("}");
  out->Line("free (chosen);");
  if (Timed(c)) out->Line("_start_closedown ();");
  out->Line("svc_run ();");
  out->Line("_msgout (\"svc_run returned\");");
  out->Line("exit (1);");
  out->Line("/* NOTREACHED */");
  out->Dedent();
  out->Line("}");
}

}  // namespace

std::string EmitServer(const EmitContext& c, bool with_main) {
  CodeWriter out;
  WriteBanner(&out);
  if (c.options.uses_via()) {
    out.Line("#ifndef RPCGEN_VIA_TRANSPORT");
    out.Line("#define RPCGEN_VIA_TRANSPORT 1 /* -s via: served through librpcvia */");
    out.Line("#endif");
  }
  out.Line("#include \"", c.options.header_name, "\"");
  out.Line("#include <stdio.h>");
  out.Line("#include <stdlib.h>");
  out.Line("#include <rpc/pmap_clnt.h>");
  out.Line("#include <string.h>");
  out.Line("#include <memory.h>");
  out.Line("#include <signal.h>");
  out.Line("#include <unistd.h>");
  out.Line("#include <sys/socket.h>");
  out.Line("#include <netinet/in.h>");
  if (c.options.syslog_errors) out.Line("#include <syslog.h>");
  WriteAllPassthrough(c, &out);
  out.Line();
  WriteSupport(c, &out);
  for (const Definition& d : c.spec.definitions) {
    if (d.kind != DefKind::kProgram) continue;
    for (const Version& v : d.versions) WriteDispatch(c, d, v, with_main, &out);
  }
  if (with_main) WriteMain(c, &out);
  return out.text();
}

}  // namespace san::rpcgen
