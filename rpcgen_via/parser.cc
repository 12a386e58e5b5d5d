#include "rpcgen_via/parser.h"

#include <set>
#include <vector>

#include "rpcgen_via/lexer.h"

namespace san::rpcgen {
namespace {

// Words that cannot name a definition, field or procedure.
const std::set<std::string_view>& Keywords() {
  static const std::set<std::string_view> words = {
      "bool",   "case",   "char",    "const",  "default",  "double",    "enum",  "float",
      "hyper",  "int",    "long",    "opaque", "program",  "quadruple", "short", "string",
      "struct", "switch", "typedef", "union",  "unsigned", "version",   "void"};
  return words;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  bool Run(Specification* spec, Diagnostic* error) {
    spec->definitions.clear();
    while (!failed_) {
      SkipPassthrough();
      FlushPassthrough(spec);
      if (Peek().kind == TokenKind::kEnd) break;
      Definition def;
      if (!ParseDefinition(&def)) break;
      FlushPassthrough(spec);  // `%` lines met inside a definition come out before it, as in rpcgen
      spec->definitions.push_back(std::move(def));
    }
    if (failed_) {
      *error = error_;
      return false;
    }
    return true;
  }

 private:
  // --- token access -----------------------------------------------------------------------------

  // Pass-through lines may appear anywhere; they are collected aside and never seen by the grammar.
  void SkipPassthrough() {
    while (tokens_[at_].kind == TokenKind::kPassthrough) {
      Definition d;
      d.kind = DefKind::kPassthrough;
      d.text = tokens_[at_].text;
      d.pos = tokens_[at_].pos;
      pending_.push_back(std::move(d));
      ++at_;
    }
  }

  void FlushPassthrough(Specification* spec) {
    for (Definition& d : pending_) spec->definitions.push_back(std::move(d));
    pending_.clear();
  }

  const Token& Peek() {
    SkipPassthrough();
    return tokens_[at_];
  }

  Token Take() {
    SkipPassthrough();
    Token t = tokens_[at_];
    if (t.kind != TokenKind::kEnd) ++at_;
    return t;
  }

  bool PeekIs(std::string_view text) {
    const Token& t = Peek();
    return (t.kind == TokenKind::kIdentifier || t.kind == TokenKind::kPunct) && t.text == text;
  }

  static std::string Show(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEnd:
        return "end of file";
      case TokenKind::kNumber:
        return "number '" + t.text + "'";
      case TokenKind::kString:
        return "string " + (t.text.size() > 40 ? t.text.substr(0, 40) + "...\"" : t.text);
      default: {
        std::string s = "'";
        s.append(t.text.size() > 40 ? t.text.substr(0, 40) + "..." : t.text).append("'");
        return s;
      }
    }
  }

  bool Fail(const SourcePos& pos, std::string message) {
    if (!failed_) {
      failed_ = true;
      error_ = Diagnostic{pos, std::move(message)};
    }
    return false;
  }

  bool Expect(std::string_view text, const char* context) {
    const Token& t = Peek();
    if ((t.kind == TokenKind::kPunct || t.kind == TokenKind::kIdentifier) && t.text == text) {
      Take();
      return true;
    }
    std::string m = "expected '";
    m.append(text).append("' ").append(context).append(", found ").append(Show(t));
    return Fail(t.pos, std::move(m));
  }

  bool ExpectName(const char* what, std::string* name, SourcePos* pos = nullptr) {
    const Token& t = Peek();
    if (t.kind != TokenKind::kIdentifier) {
      std::string m = "expected ";
      m.append(what).append(", found ").append(Show(t));
      return Fail(t.pos, std::move(m));
    }
    if (Keywords().count(t.text)) {
      std::string m = "'";
      m.append(t.text).append("' is a keyword and cannot be used as ").append(what);
      return Fail(t.pos, std::move(m));
    }
    if (pos) *pos = t.pos;
    *name = Take().text;
    return true;
  }

  // value: a number or a constant's name.
  bool ExpectValue(const char* what, std::string* value) {
    const Token& t = Peek();
    if (t.kind == TokenKind::kNumber) {
      *value = Take().text;
      return true;
    }
    return ExpectName(what, value);
  }

  // --- definitions ------------------------------------------------------------------------------

  bool ParseDefinition(Definition* def) {
    const Token& t = Peek();
    def->pos = t.pos;
    if (t.kind == TokenKind::kIdentifier) {
      if (t.text == "const") return ParseConst(def);
      if (t.text == "enum") return ParseEnum(def);
      if (t.text == "struct") return ParseStruct(def);
      if (t.text == "union") return ParseUnion(def);
      if (t.text == "typedef") return ParseTypedef(def);
      if (t.text == "program") return ParseProgram(def);
    }
    return Fail(
        t.pos,
        "expected a definition (const, enum, struct, union, typedef or program), found " + Show(t));
  }

  bool ParseConst(Definition* def) {
    Take();
    def->kind = DefKind::kConst;
    if (!ExpectName("a constant name", &def->name) || !Expect("=", "after the constant name")) {
      return false;
    }
    if (Peek().kind == TokenKind::kString) {
      def->const_value = Take().text;
      return Expect(";", "after the constant definition");
    }
    return ExpectValue("a constant value", &def->const_value) &&
           Expect(";", "after the constant definition");
  }

  bool ParseEnumBody(std::vector<EnumValue>* values) {
    if (!Expect("{", "to open the enum body")) return false;
    while (true) {
      EnumValue v;
      if (!ExpectName("an enumerator name", &v.name, &v.pos)) return false;
      if (PeekIs("=")) {
        Take();
        if (!ExpectValue("an enumerator value", &v.value)) return false;
      }
      values->push_back(std::move(v));
      if (PeekIs(",")) {
        Take();
        if (PeekIs("}")) break;  // a trailing comma, as C allows
        continue;
      }
      break;
    }
    return Expect("}", "to close the enum body");
  }

  bool ParseEnum(Definition* def) {
    Take();
    def->kind = DefKind::kEnum;
    return ExpectName("an enum name", &def->name) && ParseEnumBody(&def->enum_values) &&
           Expect(";", "after the enum definition");
  }

  bool ParseStruct(Definition* def) {
    Take();
    def->kind = DefKind::kStruct;
    if (!ExpectName("a struct name", &def->name) || !Expect("{", "to open the struct body")) {
      return false;
    }
    do {
      Declaration d;
      if (!ParseDeclaration(&d, /*void_ok=*/false) || !Expect(";", "after a struct member")) {
        return false;
      }
      def->fields.push_back(std::move(d));
    } while (!PeekIs("}") && Peek().kind != TokenKind::kEnd);
    return Expect("}", "to close the struct body") && Expect(";", "after the struct definition");
  }

  bool ParseUnion(Definition* def) {
    Take();
    def->kind = DefKind::kUnion;
    if (!ExpectName("a union name", &def->name) || !Expect("switch", "after the union name") ||
        !Expect("(", "to open the discriminant") ||
        !ParseDeclaration(&def->discriminant, /*void_ok=*/false) ||
        !Expect(")", "to close the discriminant") || !Expect("{", "to open the union body")) {
      return false;
    }
    if (def->discriminant.kind != DeclKind::kPlain) {
      return Fail(def->discriminant.pos,
                  "the discriminant must be a plain scalar, not an array or pointer");
    }
    const std::string& dt = def->discriminant.type.name;
    if (dt == "string" || dt == "opaque" || dt == "float" || dt == "double" || dt == "hyper" ||
        dt == "unsigned hyper" || def->discriminant.type.prefix == "struct" ||
        def->discriminant.type.prefix == "union") {
      return Fail(def->discriminant.pos,
                  "the discriminant must be int, unsigned int, bool or an enum, not '" + dt + "'");
    }
    while (PeekIs("case")) {
      UnionArm arm;
      while (PeekIs("case")) {
        Take();
        std::string label;
        if (!ExpectValue("a case value", &label) || !Expect(":", "after the case value")) {
          return false;
        }
        arm.labels.push_back(std::move(label));
      }
      if (!ParseDeclaration(&arm.decl, /*void_ok=*/true) || !Expect(";", "after a union arm")) {
        return false;
      }
      def->arms.push_back(std::move(arm));
    }
    if (def->arms.empty())
      return Fail(Peek().pos, "expected 'case' in the union body, found " + Show(Peek()));
    if (PeekIs("default")) {
      Take();
      def->has_default = true;
      if (!Expect(":", "after 'default'") ||
          !ParseDeclaration(&def->default_arm, /*void_ok=*/true) ||
          !Expect(";", "after the default arm")) {
        return false;
      }
      if (PeekIs("case"))
        return Fail(Peek().pos, "the default arm must be the last arm of a union");
    }
    return Expect("}", "to close the union body") && Expect(";", "after the union definition");
  }

  bool ParseTypedef(Definition* def) {
    Take();
    def->kind = DefKind::kTypedef;
    if (!ParseDeclaration(&def->typedef_decl, /*void_ok=*/false)) return false;
    def->name = def->typedef_decl.name;
    return Expect(";", "after the typedef");
  }

  bool ParseProgram(Definition* def) {
    Take();
    def->kind = DefKind::kProgram;
    if (!ExpectName("a program name", &def->name) || !Expect("{", "to open the program body")) {
      return false;
    }
    do {
      Version v;
      v.pos = Peek().pos;
      if (!Expect("version", "in the program body") || !ExpectName("a version name", &v.name) ||
          !Expect("{", "to open the version body")) {
        return false;
      }
      do {
        Procedure p;
        if (!ParseProcedure(&p)) return false;
        v.procedures.push_back(std::move(p));
      } while (!PeekIs("}") && Peek().kind != TokenKind::kEnd);
      if (!Expect("}", "to close the version body") || !Expect("=", "after the version body") ||
          !ExpectValue("a version number", &v.number) || !Expect(";", "after the version number")) {
        return false;
      }
      def->versions.push_back(std::move(v));
    } while (!PeekIs("}") && Peek().kind != TokenKind::kEnd);
    return Expect("}", "to close the program body") && Expect("=", "after the program body") &&
           ExpectValue("a program number", &def->program_number) &&
           Expect(";", "after the program number");
  }

  // A procedure's argument or result: a type specifier, `void`, or `string` (a char*).
  bool ParseProcType(TypeRef* type, bool* is_string, bool void_ok) {
    *is_string = false;
    if (PeekIs("string")) {
      Take();
      type->name = "string";
      *is_string = true;
      return true;
    }
    if (PeekIs("void")) {
      const SourcePos pos = Take().pos;
      if (!void_ok) return Fail(pos, "'void' must be the only argument");
      type->name = "void";
      return true;
    }
    if (PeekIs("opaque"))
      return Fail(Peek().pos, "'opaque' cannot be a procedure argument or result; use a typedef");
    return ParseTypeSpecifier(type);
  }

  bool ParseProcedure(Procedure* p) {
    p->pos = Peek().pos;
    bool is_string = false;
    if (!ParseProcType(&p->result, &is_string, true)) return false;
    p->result_is_string = is_string;
    if (PeekIs("*"))
      return Fail(Peek().pos, "a procedure result cannot be a pointer; use a typedef");
    if (!ExpectName("a procedure name", &p->name) || !Expect("(", "to open the argument list")) {
      return false;
    }
    do {
      if (!p->args.empty() && !Expect(",", "between arguments")) return false;
      TypeRef arg;
      if (!ParseProcType(&arg, &is_string, p->args.empty())) return false;
      if (arg.name == "void" && !PeekIs(")"))
        return Fail(Peek().pos, "'void' must be the only argument");
      if (PeekIs("*"))
        return Fail(Peek().pos, "a procedure argument cannot be a pointer; use a typedef");
      p->args.push_back(std::move(arg));
      p->arg_is_string.push_back(is_string);
    } while (PeekIs(","));
    return Expect(")", "to close the argument list") && Expect("=", "after the procedure") &&
           ExpectValue("a procedure number", &p->number) &&
           Expect(";", "after the procedure number");
  }

  // --- types and declarations -------------------------------------------------------------------

  bool ParseTypeSpecifier(TypeRef* type) {
    const Token t = Peek();
    if (t.kind != TokenKind::kIdentifier) return Fail(t.pos, "expected a type, found " + Show(t));
    const std::string& w = t.text;
    if (w == "unsigned") {
      Take();
      const Token& n = Peek();
      if (n.kind == TokenKind::kIdentifier &&
          (n.text == "int" || n.text == "hyper" || n.text == "char" || n.text == "short" ||
           n.text == "long")) {
        type->name = "unsigned " + Take().text;
      } else {
        type->name = "unsigned int";  // `unsigned` alone, as rpcgen accepts
      }
      return true;
    }
    if (w == "int" || w == "hyper" || w == "float" || w == "double" || w == "bool" || w == "char" ||
        w == "short" || w == "long") {
      type->name = Take().text;
      return true;
    }
    if (w == "quadruple") {
      return Fail(t.pos,
                  "'quadruple' is not supported (libtirpc has no quadruple-precision XDR routine)");
    }
    if (w == "struct" || w == "union" || w == "enum") {
      Take();
      if (PeekIs("{") || (w == "union" && PeekIs("switch"))) {
        return Fail(Peek().pos,
                    "anonymous " + w +
                        " definitions inside declarations are not supported; define a named " + w +
                        " and refer to it");
      }
      type->prefix = w;
      return ExpectName("a type name", &type->name);
    }
    if (w == "string" || w == "opaque" || w == "void") {
      return Fail(t.pos, "'" + w + "' is not allowed here");
    }
    return ExpectName("a type", &type->name);
  }

  bool ParseDeclaration(Declaration* d, bool void_ok) {
    d->pos = Peek().pos;
    if (PeekIs("void")) {
      if (!void_ok)
        return Fail(d->pos, "'void' is only allowed as a union arm or procedure argument");
      Take();
      d->kind = DeclKind::kVoid;
      d->type.name = "void";
      return true;
    }
    const bool is_string = PeekIs("string");
    const bool is_opaque = PeekIs("opaque");
    if (is_string || is_opaque) {
      d->type.name = Take().text;
    } else if (!ParseTypeSpecifier(&d->type)) {
      return false;
    }
    if (PeekIs("*")) {
      const SourcePos star = Take().pos;
      if (is_string || is_opaque) {
        return Fail(star, "'" + d->type.name + "' cannot be optional data ('*'); use a typedef");
      }
      d->kind = DeclKind::kOptional;
      return ExpectName("a name", &d->name);
    }
    if (!ExpectName("a name", &d->name)) return false;
    d->kind = DeclKind::kPlain;
    if (PeekIs("[")) {
      const SourcePos open = Take().pos;
      if (is_string)
        return Fail(open, "a string must be declared with <> (variable length), not []");
      if (PeekIs("]")) return Fail(Peek().pos, "a fixed-length array needs a size");
      d->kind = DeclKind::kFixedArray;
      return ExpectValue("an array size", &d->bound) && Expect("]", "to close the array size");
    }
    if (PeekIs("<")) {
      Take();
      d->kind = DeclKind::kVarArray;
      if (!PeekIs(">") && !ExpectValue("a maximum size", &d->bound)) return false;
      return Expect(">", "to close the maximum size");
    }
    if (is_string)
      return Fail(Peek().pos, "a string must be declared with <> after its name, e.g. 'string " +
                                  d->name + "<>'");
    if (is_opaque)
      return Fail(Peek().pos, "opaque data must be declared with [size] or <max> after its name");
    return true;
  }

  std::vector<Token> tokens_;
  size_t at_ = 0;
  std::vector<Definition> pending_;
  bool failed_ = false;
  Diagnostic error_;
};

}  // namespace

bool Parse(std::string_view text, const std::string& file, Specification* spec, Diagnostic* error) {
  std::vector<Token> tokens;
  if (!Tokenize(text, file, &tokens, error)) return false;
  return Parser(std::move(tokens)).Run(spec, error);
}

}  // namespace san::rpcgen
