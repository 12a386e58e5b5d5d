// Parser: every construct of the language into the AST, and syntax errors at the right place.
#include "rpcgen_via/parser.h"

#include <gtest/gtest.h>

namespace san::rpcgen {
namespace {

Specification ParseOk(const std::string& text) {
  Specification spec;
  Diagnostic error;
  EXPECT_TRUE(Parse(text, "p.x", &spec, &error)) << error.ToString();
  return spec;
}

Diagnostic ParseError(const std::string& text) {
  Specification spec;
  Diagnostic error;
  EXPECT_FALSE(Parse(text, "p.x", &spec, &error)) << text;
  return error;
}

TEST(RpcgenViaParser, ConstEnumTypedef) {
  const Specification s = ParseOk(
      "const A = 10; const B = A; const S = \"hex\";\n"
      "enum e { X = 1, Y, Z = A, };\n"
      "typedef string str<A>; typedef opaque fix[4]; typedef int v<>; typedef e *pe;");
  ASSERT_EQ(s.definitions.size(), 8u);
  EXPECT_EQ(s.definitions[1].const_value, "A");
  EXPECT_EQ(s.definitions[2].const_value, "\"hex\"");
  const Definition& e = s.definitions[3];
  EXPECT_EQ(e.kind, DefKind::kEnum);
  ASSERT_EQ(e.enum_values.size(), 3u);
  EXPECT_EQ(e.enum_values[1].value, "");
  EXPECT_EQ(e.enum_values[2].value, "A");
  EXPECT_EQ(s.definitions[4].typedef_decl.kind, DeclKind::kVarArray);
  EXPECT_EQ(s.definitions[4].typedef_decl.bound, "A");
  EXPECT_EQ(s.definitions[5].typedef_decl.kind, DeclKind::kFixedArray);
  EXPECT_EQ(s.definitions[6].typedef_decl.bound, "");
  EXPECT_EQ(s.definitions[7].typedef_decl.kind, DeclKind::kOptional);
}

TEST(RpcgenViaParser, StructWithEveryDeclaration) {
  const Specification s = ParseOk(
      "struct s { unsigned hyper a; unsigned b; int c[3]; float d<>; opaque e<9>;"
      " string f<>; struct s *next; bool g; double h; unsigned char i; long j; };");
  const Definition& d = s.definitions[0];
  ASSERT_EQ(d.fields.size(), 11u);
  EXPECT_EQ(d.fields[0].type.name, "unsigned hyper");
  EXPECT_EQ(d.fields[1].type.name, "unsigned int");
  EXPECT_EQ(d.fields[2].kind, DeclKind::kFixedArray);
  EXPECT_EQ(d.fields[3].kind, DeclKind::kVarArray);
  EXPECT_EQ(d.fields[4].type.name, "opaque");
  EXPECT_EQ(d.fields[6].kind, DeclKind::kOptional);
  EXPECT_EQ(d.fields[6].type.prefix, "struct");
  EXPECT_EQ(d.fields[9].type.name, "unsigned char");
}

TEST(RpcgenViaParser, UnionWithSharedCasesVoidAndDefault) {
  const Specification s = ParseOk(
      "union u switch (e kind) { case A: case B: int x; case C: void; default: string s<>; };");
  const Definition& d = s.definitions[0];
  EXPECT_EQ(d.discriminant.name, "kind");
  ASSERT_EQ(d.arms.size(), 2u);
  EXPECT_EQ(d.arms[0].labels, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(d.arms[1].decl.kind, DeclKind::kVoid);
  EXPECT_TRUE(d.has_default);
  EXPECT_EQ(d.default_arm.name, "s");
}

TEST(RpcgenViaParser, ProgramWithVersions) {
  const Specification s = ParseOk(
      "program P { version V1 { void NUL(void) = 0; string ECHO(string) = 1; } = 1;"
      " version V2 { int TWO(int, hyper) = 1; } = 2; } = 0x20000001;");
  const Definition& d = s.definitions[0];
  EXPECT_EQ(d.program_number, "0x20000001");
  ASSERT_EQ(d.versions.size(), 2u);
  EXPECT_TRUE(d.versions[0].procedures[1].result_is_string);
  EXPECT_TRUE(d.versions[0].procedures[1].arg_is_string[0]);
  EXPECT_EQ(d.versions[1].procedures[0].args.size(), 2u);
}

TEST(RpcgenViaParser, PassthroughKeepsItsPlace) {
  const Specification s = ParseOk("%one\nconst A = 1;\n%two\nstruct s {\n%three\nint a; };");
  ASSERT_EQ(s.definitions.size(), 5u);
  EXPECT_EQ(s.definitions[0].text, "one");
  EXPECT_EQ(s.definitions[2].text, "two");
  EXPECT_EQ(s.definitions[3].text, "three");  // met inside the struct: comes out before it
  EXPECT_EQ(s.definitions[4].kind, DefKind::kStruct);
}

struct ErrorCase {
  const char* text;
  int line;
  int column;
  const char* message_part;
};

TEST(RpcgenViaParser, SyntaxErrorsPointAtTheProblem) {
  const ErrorCase cases[] = {
      {"const A = ;", 1, 11, "expected a constant value"},
      {"struct s { int a };", 1, 18, "expected ';' after a struct member"},
      {"struct s { };", 1, 12, "expected a type"},
      {"struct s {\n  string name;\n};", 2, 14, "must be declared with <>"},
      {"struct s { string n[3]; };", 1, 20, "not []"},
      {"struct s { opaque o; };", 1, 20, "opaque data"},
      {"struct s { opaque *o; };", 1, 19, "optional"},
      {"struct s { void; };", 1, 12, "'void' is only allowed"},
      {"union u switch (int d) { default: int x; };", 1, 26, "expected 'case'"},
      {"union u switch (int d) { case 1: int a; default: void; case 2: int b; };", 1, 56,
       "default arm must be the last"},
      {"union u switch (string s<>) { case 1: void; };", 1, 17, "plain scalar"},
      {"union u switch (double d) { case 1: void; };", 1, 17, "discriminant must be int"},
      {"typedef int struct;", 1, 13, "keyword"},
      {"program P { version V { int F(void, int) = 1; } = 1; } = 1;", 1, 35, "only argument"},
      {"program P { version V { int F(int *) = 1; } = 1; } = 1;", 1, 35, "pointer"},
      {"program P { version V { } = 1; } = 1;", 1, 25, "expected a type"},
      {"struct s { quadruple q; };", 1, 12, "quadruple"},
      {"struct s { struct { int a; } x; };", 1, 19, "anonymous"},
      {"enum e { };", 1, 10, "expected an enumerator name"},
      {"bogus", 1, 1, "expected a definition"},
      {"struct s { int a; }", 1, 20, "end of file"},
  };
  for (const ErrorCase& c : cases) {
    const Diagnostic e = ParseError(c.text);
    EXPECT_EQ(e.pos.line, c.line) << c.text << " -> " << e.ToString();
    EXPECT_EQ(e.pos.column, c.column) << c.text << " -> " << e.ToString();
    EXPECT_NE(e.message.find(c.message_part), std::string::npos)
        << c.text << " -> " << e.ToString();
    EXPECT_EQ(e.pos.file, "p.x");
  }
}

}  // namespace
}  // namespace san::rpcgen
