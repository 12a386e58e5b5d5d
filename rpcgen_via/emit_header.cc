#include "rpcgen_via/emit_header.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

namespace san::rpcgen {
namespace {

// An enumerator without a value is the previous one plus one (the first is 0). Literal values are
// computed; after a named value we write "NAME + k" for the C compiler to evaluate.
std::string EnumValueText(const std::string& base, long long offset) {
  if (base.empty()) return std::to_string(offset);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(base.c_str(), &end, 0);
  if (errno == 0 && end && *end == '\0') return std::to_string(v + offset);
  return offset == 0 ? base : Cat("(", base, ") + ", std::to_string(offset));
}

void WriteEnum(const Definition& d, CodeWriter* out) {
  out->Line("enum ", d.name, " {");
  out->Indent();
  std::string base;
  long long offset = 0;
  for (const EnumValue& v : d.enum_values) {
    if (!v.value.empty()) {
      base = v.value;
      offset = 0;
    }
    out->Line(v.name, " = ", EnumValueText(base, offset), ",");
    ++offset;
  }
  out->Dedent();
  out->Line("};");
  out->Line("typedef enum ", d.name, " ", d.name, ";");
  out->Line();
}

// The typedef comes first so members may name the type itself or types defined later through a
// pointer (linked lists, mutually recursive structures).
void WriteStruct(const EmitContext& c, const Definition& d, CodeWriter* out) {
  out->Line("typedef struct ", d.name, " ", d.name, ";");
  out->Line("struct ", d.name, " {");
  out->Indent();
  for (const Declaration& f : d.fields) c.types.WriteDeclaration(f, "", out);
  out->Dedent();
  out->Line("};");
  out->Line();
}

void WriteUnion(const EmitContext& c, const Definition& d, CodeWriter* out) {
  out->Line("typedef struct ", d.name, " ", d.name, ";");
  out->Line("struct ", d.name, " {");
  out->Indent();
  c.types.WriteDeclaration(d.discriminant, "", out);
  std::vector<const Declaration*> arms;
  for (const UnionArm& a : d.arms) {
    if (a.decl.kind != DeclKind::kVoid) arms.push_back(&a.decl);
  }
  if (d.has_default && d.default_arm.kind != DeclKind::kVoid) arms.push_back(&d.default_arm);
  if (!arms.empty()) {
    out->Line("union {");
    out->Indent();
    for (const Declaration* a : arms) c.types.WriteDeclaration(*a, "", out);
    out->Dedent();
    out->Line("} ", d.name, "_u;");
  }
  out->Dedent();
  out->Line("};");
  out->Line();
}

// The parameter list of a client stub (`for_server` false) or server procedure, without names.
std::string Parameters(const EmitContext& c, const Procedure& p, bool for_server) {
  std::string s;
  if (c.options.newstyle) {
    if (!HasVoidArg(p)) {
      for (size_t i = 0; i < p.args.size(); ++i) s.append(ArgCType(c, p, i)).append(", ");
    }
  } else {
    s.append(HasVoidArg(p) ? "void *" : PointerTo(ArgCType(c, p, 0))).append(", ");
  }
  if (c.options.mt_safe)
    s.append(HasVoidResult(p) ? "void *" : PointerTo(ResultCType(c, p))).append(", ");
  s.append(for_server ? "struct svc_req *" : "CLIENT *");
  return s;
}

void WriteProgram(const EmitContext& c, const Definition& d, std::set<std::string>* defined,
                  CodeWriter* out) {
  for (const Definition& s : ArgumentStructs(d)) WriteStruct(c, s, out);
  out->Line("#define ", d.name, " ", d.program_number);
  for (const Version& v : d.versions) {
    out->Line("#define ", v.name, " ", v.number);
    out->Line();
    for (const Procedure& p : v.procedures) {
      // A procedure in several versions is one macro. NULLPROC is already <rpc/clnt.h>'s.
      if (defined->insert(p.name).second && p.name != "NULLPROC") {
        out->Line("#define ", p.name, " ", p.number);
      }
      const std::string result = c.options.mt_safe  ? std::string("enum clnt_stat ")
                                 : HasVoidResult(p) ? std::string("void * ")
                                                    : PointerTo(ResultCType(c, p));
      const std::string server_result = c.options.mt_safe ? std::string("bool_t ") : result;
      out->Line("extern ", result, StubName(p, v), "(", Parameters(c, p, false), ");");
      out->Line("extern ", server_result, StubName(p, v), "_svc(", Parameters(c, p, true), ");");
    }
    out->Line("extern int ", DispatchName(d, v), "_freeresult (SVCXPRT *, xdrproc_t, caddr_t);");
    out->Line();
  }
}

void WriteXdrPrototype(const EmitContext& c, const Definition& d, CodeWriter* out) {
  const bool vector = d.kind == DefKind::kTypedef && c.types.IsVector(TypeRef{d.name, ""});
  out->Line("extern bool_t xdr_", d.name, " (XDR *, ", d.name, vector ? ");" : " *);");
}

}  // namespace

std::string HeaderGuard(const std::string& header_name) {
  std::string g = "_";
  for (char ch : header_name) {
    g.push_back(std::isalnum(static_cast<unsigned char>(ch))
                    ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch)))
                    : '_');
  }
  g.append("_RPCGEN");
  return g;
}

std::string EmitHeader(const EmitContext& c) {
  CodeWriter out;
  WriteBanner(&out);
  const std::string guard = HeaderGuard(c.options.header_name);
  out.Line("#ifndef ", guard);
  out.Line("#define ", guard);
  out.Line();
  out.Line("#include <rpc/rpc.h>");
  out.Line();
  out.Line(
      "/* Transport hook: built with -DRPCGEN_VIA_TRANSPORT, the \"via\" nettype of librpcvia");
  out.Line(" * is available to clnt_create() and svc_create(); other nettypes stay libtirpc's. */");
  out.Line("#ifdef RPCGEN_VIA_TRANSPORT");
  out.Line("#include <rpcvia/rpcvia.h>");
  out.Line("#endif");
  out.Line();
  out.Line("#ifdef __cplusplus");
  out.Line("extern \"C\" {");
  out.Line("#endif");
  out.Line();
  std::set<std::string> defined_procs;
  for (const Definition& d : c.spec.definitions) {
    switch (d.kind) {
      case DefKind::kPassthrough:
        out.Line(d.text);
        break;
      case DefKind::kConst:
        out.Line("#define ", d.name, " ", d.const_value);
        out.Line();
        break;
      case DefKind::kEnum:
        WriteEnum(d, &out);
        break;
      case DefKind::kStruct:
        WriteStruct(c, d, &out);
        break;
      case DefKind::kUnion:
        WriteUnion(c, d, &out);
        break;
      case DefKind::kTypedef:
        c.types.WriteDeclaration(d.typedef_decl, "typedef ", &out);
        out.Line();
        break;
      case DefKind::kProgram:
        break;  // after every type (programs may name types defined below them), as rpcgen
    }
  }
  for (const Definition& d : c.spec.definitions) {
    if (d.kind == DefKind::kProgram) WriteProgram(c, d, &defined_procs, &out);
  }
  out.Line("/* the xdr functions */");
  out.Line();
  for (const Definition& d : c.spec.definitions) {
    if (d.kind == DefKind::kEnum || d.kind == DefKind::kStruct || d.kind == DefKind::kUnion ||
        d.kind == DefKind::kTypedef) {
      WriteXdrPrototype(c, d, &out);
    } else if (d.kind == DefKind::kProgram) {
      for (const Definition& s : ArgumentStructs(d)) WriteXdrPrototype(c, s, &out);
    }
  }
  out.Line();
  out.Line("#ifdef __cplusplus");
  out.Line("}");
  out.Line("#endif");
  out.Line();
  out.Line("#endif /* !", guard, " */");
  return out.text();
}

}  // namespace san::rpcgen
