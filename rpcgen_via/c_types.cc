#include "rpcgen_via/c_types.h"

#include <set>

namespace san::rpcgen {
namespace {

struct Builtin {
  const char* rpc;
  const char* c;
  const char* xdr;
};

constexpr Builtin kBuiltins[] = {
    {"int", "int", "xdr_int"},
    {"unsigned int", "u_int", "xdr_u_int"},
    {"hyper", "quad_t", "xdr_quad_t"},
    {"unsigned hyper", "u_quad_t", "xdr_u_quad_t"},
    {"float", "float", "xdr_float"},
    {"double", "double", "xdr_double"},
    {"bool", "bool_t", "xdr_bool"},
    {"char", "char", "xdr_char"},
    {"unsigned char", "u_char", "xdr_u_char"},
    {"short", "short", "xdr_short"},
    {"unsigned short", "u_short", "xdr_u_short"},
    {"long", "long", "xdr_long"},
    {"unsigned long", "u_long", "xdr_u_long"},
    {"string", "char *", "xdr_wrapstring"},
    {"opaque", "char", "xdr_opaque"},
    {"void", "void", "xdr_void"},
};

const Builtin* FindBuiltin(const TypeRef& t) {
  if (!t.prefix.empty()) return nullptr;
  for (const Builtin& b : kBuiltins) {
    if (t.name == b.rpc) return &b;
  }
  return nullptr;
}

}  // namespace

std::string BoundOrUnlimited(const Declaration& d) { return d.bound.empty() ? "~0" : d.bound; }

CTypes::CTypes(const Specification& spec) : spec_(spec) {
  for (const Definition& d : spec_.definitions) {
    if (d.kind != DefKind::kPassthrough && d.kind != DefKind::kConst) defs_.emplace(d.name, &d);
  }
}

const Definition* CTypes::Find(const std::string& name) const {
  auto it = defs_.find(name);
  return it == defs_.end() ? nullptr : it->second;
}

std::string CTypes::CType(const TypeRef& type) const {
  if (const Builtin* b = FindBuiltin(type)) return b->c;
  if (!type.prefix.empty()) return Cat(type.prefix, " ", type.name);
  return type.name;
}

std::string CTypes::XdrProc(const TypeRef& type) const {
  if (const Builtin* b = FindBuiltin(type)) return b->xdr;
  return Cat("xdr_", type.name);
}

bool CTypes::IsVector(const TypeRef& type) const {
  std::set<std::string> seen;  // a typedef cycle is an error for the C compiler, not a hang here
  TypeRef t = type;
  while (FindBuiltin(t) == nullptr && seen.insert(t.name).second) {
    const Definition* d = Find(t.name);
    if (d == nullptr || d->kind != DefKind::kTypedef) return false;
    const Declaration& td = d->typedef_decl;
    if (td.kind == DeclKind::kFixedArray) return true;
    if (td.kind != DeclKind::kPlain) return false;
    t = td.type;
  }
  return false;
}

void CTypes::WriteDeclaration(const Declaration& d, std::string_view keyword,
                              CodeWriter* out) const {
  const std::string ct = CType(d.type);
  switch (d.kind) {
    case DeclKind::kVoid:
      return;
    case DeclKind::kPlain:
      out->Line(keyword, ct, " ", d.name, ";");
      return;
    case DeclKind::kOptional:
      out->Line(keyword, ct, " *", d.name, ";");
      return;
    case DeclKind::kFixedArray:
      out->Line(keyword, ct, " ", d.name, "[", d.bound, "];");
      return;
    case DeclKind::kVarArray:
      if (d.type.name == "string" && d.type.prefix.empty()) {
        out->Line(keyword, "char *", d.name, ";");
        return;
      }
      out->Line(keyword, "struct {");
      out->Indent();
      out->Line("u_int ", d.name, "_len;");
      out->Line(ct, " *", d.name, "_val;");
      out->Dedent();
      out->Line("} ", d.name, ";");
      return;
  }
}

std::string CTypes::XdrCall(const Declaration& d, const std::string& object) const {
  // The object's address, its value (for arrays), and the prefix for its _len/_val members.
  const bool self = object.empty();
  const std::string addr = self ? "objp" : Cat("&", object);
  const std::string value = self ? "objp" : object;
  const std::string members = self ? Cat("objp->", d.name, "_") : Cat(object, ".", d.name, "_");
  const bool is_string = d.type.name == "string" && d.type.prefix.empty();
  const bool is_opaque = d.type.name == "opaque" && d.type.prefix.empty();
  const std::string ct = CType(d.type);
  const std::string proc = XdrProc(d.type);
  switch (d.kind) {
    case DeclKind::kVoid:
      return "";
    case DeclKind::kPlain:
      return Cat(proc, " (xdrs, ", IsVector(d.type) ? value : addr, ")");
    case DeclKind::kOptional:
      return Cat("xdr_pointer (xdrs, (char **)", addr, ", sizeof (", ct, "), (xdrproc_t) ", proc,
                 ")");
    case DeclKind::kFixedArray:
      if (is_opaque) return Cat("xdr_opaque (xdrs, ", value, ", ", d.bound, ")");
      return Cat("xdr_vector (xdrs, (char *)", value, ", ", d.bound, ",\n\t\tsizeof (", ct,
                 "), (xdrproc_t) ", proc, ")");
    case DeclKind::kVarArray:
      if (is_string) return Cat("xdr_string (xdrs, ", addr, ", ", BoundOrUnlimited(d), ")");
      if (is_opaque) {
        return Cat("xdr_bytes (xdrs, (char **)&", members, "val, (u_int *) &", members, "len, ",
                   BoundOrUnlimited(d), ")");
      }
      return Cat("xdr_array (xdrs, (char **)&", members, "val, (u_int *) &", members, "len, ",
                 BoundOrUnlimited(d), ",\n\t\tsizeof (", ct, "), (xdrproc_t) ", proc, ")");
  }
  return "";
}

}  // namespace san::rpcgen
