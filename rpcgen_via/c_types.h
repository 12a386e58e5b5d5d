// How RPC-language types and declarations map to C for libtirpc, the way the system rpcgen maps
// them (so code written against rpcgen's headers compiles against ours):
//   int -> int, unsigned int -> u_int, hyper -> quad_t, unsigned hyper -> u_quad_t, bool -> bool_t,
//   string<> -> char *, opaque x[n] -> char x[n], T x<n> -> struct { u_int x_len; T *x_val; } x,
//   T *x -> T *x; and each type T has the XDR routine xdr_T.
// A "vector type" is a typedef (possibly through other typedefs) of a fixed-length array: its C
// object is an array, so it is passed to its XDR routine by value, not by address.
//
// Thread-safety: immutable after construction. Holds a reference to the Specification, which must
// outlive it.
#pragma once

#include <map>
#include <string>

#include "rpcgen_via/ast.h"
#include "rpcgen_via/code_writer.h"

namespace san::rpcgen {

class CTypes {
 public:
  explicit CTypes(const Specification& spec);

  // The C spelling of a type: "u_int", "quad_t", "point", "struct node".
  std::string CType(const TypeRef& type) const;
  // The XDR routine for a type: "xdr_u_int", "xdr_point"; `string` (procedure results/arguments)
  // is "xdr_wrapstring", `void` is "xdr_void".
  std::string XdrProc(const TypeRef& type) const;
  // True when the type names (through typedefs) a fixed-length array.
  bool IsVector(const TypeRef& type) const;
  // The definition of a user type, or nullptr (a built-in or a type from an included C header).
  const Definition* Find(const std::string& name) const;

  // Writes a struct/union member or the body of a typedef: `u_int x;`, `char *s;`, the
  // `struct { u_int x_len; T *x_val; }` of a variable array. `keyword` is "" for members and
  // "typedef " for typedefs.
  void WriteDeclaration(const Declaration& d, std::string_view keyword, CodeWriter* out) const;

  // The XDR call that encodes/decodes one declaration, as an expression: `xdr_int (xdrs,
  // &objp->x)`. `object` is the C lvalue of the declared object ("objp->x"), or "" when the object
  // is `*objp` itself (a typedef's own routine). Returns "" for void.
  std::string XdrCall(const Declaration& d, const std::string& object) const;

 private:
  const Specification& spec_;
  std::map<std::string, const Definition*> defs_;
};

// "0x20000101" or "MAXLEN" as written; "~0" for an unbounded maximum.
std::string BoundOrUnlimited(const Declaration& d);

}  // namespace san::rpcgen
