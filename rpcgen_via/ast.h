// The abstract syntax of an RPC-language file (RFC 5531 section 12, XDR language RFC 4506 section
// 6): what the parser produces and every emitter reads.
//
// Thread-safety: plain values, no shared state. Ownership: a Specification owns all its definitions
// by value. Invariants (established by the parser and checker, relied on by the emitters): every
// Declaration's kind agrees with its type (string is only kVarArray; opaque only kFixedArray or
// kVarArray; void only where void is allowed); names of definitions are unique.
#pragma once

#include <string>
#include <vector>

namespace san::rpcgen {

// Where something was written, in the user's file (after following cpp line markers).
struct SourcePos {
  std::string file;
  int line = 0;
  int column = 0;
};

// The shape of a declaration: `T x`, `T x[n]`, `T x<n>` / `T x<>`, `T *x`, or `void`.
enum class DeclKind { kPlain, kFixedArray, kVarArray, kOptional, kVoid };

// A type as written. `name` is the RPC-language spelling for built-ins ("int", "unsigned int",
// "hyper", "unsigned hyper", "float", "double", "bool", "string", "opaque", "char", "short", "long"
// and their unsigned forms) or the identifier of a user type; `prefix` is "struct"/"enum"/"union"
// when the source said `struct foo` (kept because C needs it for self-references).
struct TypeRef {
  std::string name;
  std::string prefix;
};

struct Declaration {
  DeclKind kind = DeclKind::kPlain;
  TypeRef type;
  std::string name;
  std::string bound;  // array size or maximum (a number or a constant's name); "" = unbounded <>
  SourcePos pos;
};

struct EnumValue {
  std::string name;
  std::string value;  // as written; "" = previous + 1 (RFC 4506 requires values, rpcgen does not)
  SourcePos pos;
};

struct UnionArm {
  std::vector<std::string> labels;  // case values; empty for the default arm
  Declaration decl;                 // kVoid for `void;`
};

struct Procedure {
  std::string name;
  std::string number;
  TypeRef result;                 // "void" for no result
  bool result_is_string = false;  // `string NAME(...)`: a char* result
  std::vector<TypeRef> args;      // a single "void" or empty for no argument
  std::vector<bool> arg_is_string;
  SourcePos pos;
};

struct Version {
  std::string name;
  std::string number;
  std::vector<Procedure> procedures;
  SourcePos pos;
};

enum class DefKind { kConst, kEnum, kStruct, kUnion, kTypedef, kProgram, kPassthrough };

struct Definition {
  DefKind kind = DefKind::kConst;
  std::string name;  // the defined name (empty for kPassthrough)
  SourcePos pos;
  std::string const_value;             // kConst
  std::vector<EnumValue> enum_values;  // kEnum
  std::vector<Declaration> fields;     // kStruct
  Declaration discriminant;            // kUnion
  std::vector<UnionArm> arms;          // kUnion: the case arms, in order
  bool has_default = false;            // kUnion
  Declaration default_arm;             // kUnion, when has_default
  Declaration typedef_decl;            // kTypedef: the declaration after `typedef`
  std::string program_number;          // kProgram
  std::vector<Version> versions;       // kProgram
  std::string text;                    // kPassthrough: the line after '%'
};

struct Specification {
  std::vector<Definition> definitions;
};

// One error with where it happened; printed as "file:line:column: error: message".
struct Diagnostic {
  SourcePos pos;
  std::string message;
  std::string ToString() const;
};

}  // namespace san::rpcgen
