#include "rpcgen_via/emit_xdr.h"

namespace san::rpcgen {
namespace {

void Check(const std::string& call, CodeWriter* out) {
  if (call.empty()) return;
  out->Line("if (!", call, ")");
  out->Indent();
  out->Line("return FALSE;");
  out->Dedent();
}

void Open(const EmitContext& c, const Definition& d, CodeWriter* out) {
  const bool vector = d.kind == DefKind::kTypedef && c.types.IsVector(TypeRef{d.name, ""});
  out->Line("bool_t");
  out->Line("xdr_", d.name, " (XDR *xdrs, ", d.name, vector ? " objp)" : " *objp)");
  out->Line("{");
  out->Indent();
}

void Close(CodeWriter* out) {
  out->Line("return TRUE;");
  out->Dedent();
  out->Line("}");
  out->Line();
}

void WriteStruct(const EmitContext& c, const Definition& d, CodeWriter* out) {
  Open(c, d, out);
  for (const Declaration& f : d.fields) Check(c.types.XdrCall(f, Cat("objp->", f.name)), out);
  Close(out);
}

void WriteUnion(const EmitContext& c, const Definition& d, CodeWriter* out) {
  Open(c, d, out);
  const std::string disc = Cat("objp->", d.discriminant.name);
  Check(c.types.XdrCall(d.discriminant, disc), out);
  out->Line("switch (", disc, ") {");
  auto arm_body = [&](const Declaration& decl) {
    out->Indent();
    Check(c.types.XdrCall(decl, Cat("objp->", d.name, "_u.", decl.name)), out);
    out->Line("break;");
    out->Dedent();
  };
  for (const UnionArm& a : d.arms) {
    for (const std::string& l : a.labels) out->Line("case ", l, ":");
    arm_body(a.decl);
  }
  out->Line("default:");
  if (d.has_default) {
    arm_body(d.default_arm);
  } else {
    // A discriminant no arm names is invalid data (RFC 4506 4.15): refuse it either way.
    out->Indent();
    out->Line("return FALSE;");
    out->Dedent();
  }
  out->Line("}");
  Close(out);
}

}  // namespace

std::string EmitXdr(const EmitContext& c) {
  CodeWriter out;
  WriteBanner(&out);
  out.Line("#include \"", c.options.header_name, "\"");
  out.Line();
  for (const Definition& d : c.spec.definitions) {
    switch (d.kind) {
      case DefKind::kPassthrough:
        out.Line(d.text);
        break;
      case DefKind::kConst:
        break;
      case DefKind::kEnum:
        Open(c, d, &out);
        Check("xdr_enum (xdrs, (enum_t *) objp)", &out);
        Close(&out);
        break;
      case DefKind::kStruct:
        WriteStruct(c, d, &out);
        break;
      case DefKind::kUnion:
        WriteUnion(c, d, &out);
        break;
      case DefKind::kTypedef:
        Open(c, d, &out);
        Check(c.types.XdrCall(d.typedef_decl, ""), &out);
        Close(&out);
        break;
      case DefKind::kProgram:
        for (const Definition& s : ArgumentStructs(d)) WriteStruct(c, s, &out);
        break;
    }
  }
  return out.text();
}

}  // namespace san::rpcgen
