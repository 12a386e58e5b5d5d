#include "rpcgen_via/emit_client.h"

namespace san::rpcgen {
namespace {

void WriteStub(const EmitContext& c, const Procedure& p, const Version& v, CodeWriter* out) {
  const bool mt = c.options.mt_safe;
  const bool n = c.options.newstyle;
  const bool void_result = HasVoidResult(p);
  const std::string res_type = ResultCType(c, p);
  std::string params;
  std::string arg_expr;  // what clnt_call gets as the argument pointer
  if (n) {
    params = NewstyleParams(c, p);
    arg_expr = HasArgumentStruct(p) ? "(caddr_t) &arg"
               : HasVoidArg(p)      ? "(caddr_t) NULL"
                                    : "(caddr_t) &arg1";
  } else {
    params.append(HasVoidArg(p) ? std::string("void *") : PointerTo(ArgCType(c, p, 0)))
        .append("argp, ");
    arg_expr = "(caddr_t) argp";
  }
  if (mt)
    params.append(void_result ? std::string("void *") : PointerTo(res_type)).append("clnt_res, ");
  params.append("CLIENT *clnt");

  out->Line(mt            ? std::string("enum clnt_stat")
            : void_result ? std::string("void *")
                          : PointerTo(res_type));
  out->Line(StubName(p, v), "(", params, ")");
  out->Line("{");
  out->Indent();
  if (HasArgumentStruct(p)) {
    out->Line(ArgumentStructName(p, v), " arg;");
    for (size_t i = 0; i < p.args.size(); ++i) {
      const std::string a = Cat("arg", std::to_string(i + 1));
      out->Line("arg.", a, " = ", a, ";");
    }
  }
  const std::string call_head =
      Cat("clnt_call (clnt, ", p.name, ",\n\t\t", XdrProcCast(ArgXdrProc(c, p, v)), ", ", arg_expr,
          ",\n\t\t", XdrProcCast(ResultXdrProc(c, p)), ", ");
  if (mt) {
    out->Line("return (", call_head, "(caddr_t) clnt_res,\n\t\tTIMEOUT));");
  } else {
    out->Line("static ", Spaced(void_result ? std::string("char") : res_type), "clnt_res;");
    out->Line();
    out->Line("memset((char *)&clnt_res, 0, sizeof(clnt_res));");
    out->Line("if (", call_head, "(caddr_t) &clnt_res,\n\t\tTIMEOUT) != RPC_SUCCESS) {");
    out->Indent();
    out->Line("return (NULL);");
    out->Dedent();
    out->Line("}");
    out->Line(void_result ? "return ((void *)&clnt_res);" : "return (&clnt_res);");
  }
  out->Dedent();
  out->Line("}");
  out->Line();
}

}  // namespace

std::string EmitClient(const EmitContext& c) {
  CodeWriter out;
  WriteBanner(&out);
  out.Line("#include <memory.h> /* for memset */");
  out.Line("#include \"", c.options.header_name, "\"");
  WriteAllPassthrough(c, &out);
  out.Line();
  bool any = false;
  for (const Definition& d : c.spec.definitions) any = any || d.kind == DefKind::kProgram;
  if (!any) return out.text();  // no stubs: no TIMEOUT either (it would be an unused static)
  out.Line("/* Default timeout can be changed using clnt_control() */");
  out.Line("static struct timeval TIMEOUT = { 25, 0 };");
  out.Line();
  for (const Definition& d : c.spec.definitions) {
    if (d.kind != DefKind::kProgram) continue;
    for (const Version& v : d.versions) {
      for (const Procedure& p : v.procedures) WriteStub(c, p, v, &out);
    }
  }
  return out.text();
}

}  // namespace san::rpcgen
