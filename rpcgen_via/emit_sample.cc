#include "rpcgen_via/emit_sample.h"

namespace san::rpcgen {
namespace {

void WriteClientVersion(const EmitContext& c, const Definition& prog, const Version& v,
                        CodeWriter* out) {
  const bool mt = c.options.mt_safe;
  const bool n = c.options.newstyle;
  out->Line("void");
  out->Line(DispatchName(prog, v), "(char *host)");
  out->Line("{");
  out->Indent();
  out->Line("CLIENT *clnt;");
  out->Line("enum clnt_stat retval;");
  for (const Procedure& p : v.procedures) {
    const std::string s = StubName(p, v);
    const std::string rt = HasVoidResult(p) ? std::string("char") : ResultCType(c, p);
    out->Line(mt ? Spaced(rt) : PointerTo(HasVoidResult(p) ? std::string("void") : rt), "result_",
              s, ";");
    if (HasVoidArg(p)) {
      if (!n) out->Line("char *", s, "_arg;");
    } else if (n) {
      for (size_t i = 0; i < p.args.size(); ++i) {
        out->Line(Spaced(ArgCType(c, p, i)), s, "_arg", std::to_string(i + 1), ";");
      }
    } else {
      out->Line(Spaced(ArgCType(c, p, 0)), s, "_arg;");
    }
  }
  out->Line();
  for (const Procedure& p : v.procedures) {
    // Zeroed arguments: a template must not send uninitialized memory.
    const std::string s = StubName(p, v);
    if (HasVoidArg(p)) {
      if (!n) out->Line("memset (&", s, "_arg, 0, sizeof (", s, "_arg));");
    } else if (n) {
      for (size_t i = 0; i < p.args.size(); ++i) {
        const std::string a = Cat(s, "_arg", std::to_string(i + 1));
        out->Line("memset (&", a, ", 0, sizeof (", a, "));");
      }
    } else {
      out->Line("memset (&", s, "_arg, 0, sizeof (", s, "_arg));");
    }
  }
  out->Line("(void) retval;");
  out->Line("#ifndef\tDEBUG");
  out->Line("clnt = clnt_create (host, ", prog.name, ", ", v.name, ", \"",
            c.options.nettypes.empty() ? std::string("udp") : c.options.nettypes[0], "\");");
  out->Line("if (clnt == NULL) {");
  out->Line("\tclnt_pcreateerror (host);");
  out->Line("\texit (1);");
  out->Line("}");
  out->Line("#endif\t/* DEBUG */");
  out->Line();
  for (const Procedure& p : v.procedures) {
    const std::string s = StubName(p, v);
    std::string args;
    if (n) {
      if (!HasVoidArg(p)) {
        for (size_t i = 0; i < p.args.size(); ++i)
          args.append(s).append("_arg").append(std::to_string(i + 1)).append(", ");
      }
    } else {
      args = Cat("(void *)&", s, "_arg, ");
    }
    if (mt) {
      out->Line("retval = ", s, "(", args, "&result_", s, ", clnt);");
      out->Line("if (retval != RPC_SUCCESS) {");
    } else {
      out->Line("result_", s, " = ", s, "(", args, "clnt);");
      out->Line("if (result_", s, " == NULL) {");
    }
    out->Line("\tclnt_perror (clnt, \"call failed\");");
    out->Line("}");
  }
  out->Line("#ifndef\tDEBUG");
  out->Line("clnt_destroy (clnt);");
  out->Line("#endif\t /* DEBUG */");
  out->Dedent();
  out->Line("}");
  out->Line();
}

void WriteServerVersion(const EmitContext& c, const Definition& prog, const Version& v,
                        CodeWriter* out) {
  const bool mt = c.options.mt_safe;
  const bool n = c.options.newstyle;
  for (const Procedure& p : v.procedures) {
    const std::string s = StubName(p, v);
    std::string params;
    if (n) {
      params = NewstyleParams(c, p);
    } else {
      params = Cat(HasVoidArg(p) ? std::string("void *") : PointerTo(ArgCType(c, p, 0)), "argp, ");
    }
    if (mt)
      params.append(HasVoidResult(p) ? std::string("void *") : PointerTo(ResultCType(c, p)))
          .append("result, ");
    const std::string rt = HasVoidResult(p) ? std::string("char") : ResultCType(c, p);
    out->Line(mt                 ? std::string("bool_t")
              : HasVoidResult(p) ? std::string("void *")
                                 : PointerTo(rt));
    out->Line(s, "_svc(", params, "struct svc_req *rqstp)");
    out->Line("{");
    out->Indent();
    out->Line("(void) rqstp;");
    if (!n) {
      out->Line("(void) argp;");
    } else if (!HasVoidArg(p)) {
      for (size_t i = 0; i < p.args.size(); ++i)
        out->Line("(void) arg", std::to_string(i + 1), ";");
    }
    if (mt) out->Line("(void) result;");
    if (mt) {
      out->Line("bool_t retval = TRUE;");
    } else {
      out->Line("static ", Spaced(rt), "result;");
    }
    out->Line();
    out->Line("/*");
    out->Line(" * insert server code here");
    out->Line(" */");
    out->Line();
    out->Line(mt                 ? "return retval;"
              : HasVoidResult(p) ? "return (void *) &result;"
                                 : "return &result;");
    out->Dedent();
    out->Line("}");
    out->Line();
  }
  if (mt) {
    out->Line("int");
    out->Line(DispatchName(prog, v),
              "_freeresult (SVCXPRT *transp, xdrproc_t xdr_result, caddr_t result)");
    out->Line("{");
    out->Line("\t(void) transp;");
    out->Line("\txdr_free (xdr_result, result);");
    out->Line();
    out->Line("\t/*");
    out->Line("\t * Insert additional freeing code here, if needed");
    out->Line("\t */");
    out->Line();
    out->Line("\treturn 1;");
    out->Line("}");
    out->Line();
  }
}

// The opening both sample files share: what they are, and the generated header.
void WriteSampleBanner(const EmitContext& c, CodeWriter* out) {
  out->Line("/*");
  out->Line(" * This is sample code generated by rpcgen_via.");
  out->Line(" * These are only templates and you can use them");
  out->Line(" * as a guideline for developing your own functions.");
  out->Line(" */");
  out->Line();
  out->Line("#include \"", c.options.header_name, "\"");
}

}  // namespace

std::string EmitSampleClient(const EmitContext& c) {
  CodeWriter out;
  WriteSampleBanner(c, &out);
  out.Line("#include <stdio.h>");
  out.Line("#include <stdlib.h>");
  out.Line("#include <string.h>");
  out.Line();
  for (const Definition& d : c.spec.definitions) {
    if (d.kind != DefKind::kProgram) continue;
    for (const Version& v : d.versions) WriteClientVersion(c, d, v, &out);
  }
  out.Line("int");
  out.Line("main (int argc, char *argv[])");
  out.Line("{");
  out.Indent();
  out.Line("char *host;");
  out.Line();
  out.Line("if (argc < 2) {");
  out.Line("\tprintf (\"usage: %s server_host\\n\", argv[0]);");
  out.Line("\texit (1);");
  out.Line("}");
  out.Line("host = argv[1];");
  bool any = false;
  for (const Definition& d : c.spec.definitions) any = any || d.kind == DefKind::kProgram;
  if (!any) out.Line("(void) host;  /* no program in the file */");
  for (const Definition& d : c.spec.definitions) {
    if (d.kind != DefKind::kProgram) continue;
    for (const Version& v : d.versions) out.Line(DispatchName(d, v), " (host);");
  }
  out.Line("exit (0);");
  out.Dedent();
  out.Line("}");
  return out.text();
}

std::string EmitSampleServer(const EmitContext& c) {
  CodeWriter out;
  WriteSampleBanner(c, &out);
  out.Line();
  for (const Definition& d : c.spec.definitions) {
    if (d.kind != DefKind::kProgram) continue;
    for (const Version& v : d.versions) WriteServerVersion(c, d, v, &out);
  }
  return out.text();
}

std::string EmitMakefile(const EmitContext& c) {
  const std::string& b = c.options.base;
  CodeWriter out;
  out.Line("# This is a template Makefile generated by rpcgen_via");
  out.Line();
  out.Line("# Parameters");
  out.Line();
  out.Line("CLIENT = ", b, "_client");
  out.Line("SERVER = ", b, "_server");
  out.Line();
  out.Line("SOURCES_CLNT.c = ");
  out.Line("SOURCES_CLNT.h = ");
  out.Line("SOURCES_SVC.c = ");
  out.Line("SOURCES_SVC.h = ");
  out.Line("SOURCES.x = ", b, ".x");
  out.Line();
  out.Line("TARGETS_SVC.c = ", b, "_svc.c ", b, "_server.c ", b, "_xdr.c ");
  out.Line("TARGETS_CLNT.c = ", b, "_clnt.c ", b, "_client.c ", b, "_xdr.c ");
  out.Line("TARGETS = ", b, ".h ", b, "_xdr.c ", b, "_clnt.c ", b, "_svc.c ", b, "_client.c ", b,
           "_server.c");
  out.Line();
  out.Line("OBJECTS_CLNT = $(SOURCES_CLNT.c:%.c=%.o) $(TARGETS_CLNT.c:%.c=%.o)");
  out.Line("OBJECTS_SVC = $(SOURCES_SVC.c:%.c=%.o) $(TARGETS_SVC.c:%.c=%.o)");
  out.Line("# Compiler flags ");
  out.Line();
  if (c.options.uses_via()) {
    out.Line("CFLAGS += -g -I/usr/include/tirpc -DRPCGEN_VIA_TRANSPORT");
    out.Line("LDLIBS += -lrpcvia -lsan -ltirpc");
  } else {
    out.Line("CFLAGS += -g -I/usr/include/tirpc");
    out.Line("LDLIBS += -ltirpc");
  }
  out.Line("RPCGENFLAGS = ");
  out.Line();
  out.Line("# Targets ");
  out.Line();
  out.Line("all : $(CLIENT) $(SERVER)");
  out.Line();
  out.Line("$(TARGETS) : $(SOURCES.x) ");
  out.Line("\t", c.options.invocation, " $(RPCGENFLAGS) $(SOURCES.x)");
  out.Line();
  out.Line("$(OBJECTS_CLNT) : $(SOURCES_CLNT.c) $(SOURCES_CLNT.h) $(TARGETS_CLNT.c) ");
  out.Line();
  out.Line("$(OBJECTS_SVC) : $(SOURCES_SVC.c) $(SOURCES_SVC.h) $(TARGETS_SVC.c) ");
  out.Line();
  out.Line("$(CLIENT) : $(OBJECTS_CLNT) ");
  out.Line("\t$(LINK.c) -o $(CLIENT) $(OBJECTS_CLNT) $(LDLIBS) ");
  out.Line();
  out.Line("$(SERVER) : $(OBJECTS_SVC) ");
  out.Line("\t$(LINK.c) -o $(SERVER) $(OBJECTS_SVC) $(LDLIBS)");
  out.Line();
  out.Line("clean:");
  out.Line("\t $(RM) core $(TARGETS) $(OBJECTS_CLNT) $(OBJECTS_SVC) $(CLIENT) $(SERVER)");
  out.Line();
  return out.text();
}

}  // namespace san::rpcgen
