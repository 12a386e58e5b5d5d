// Checker: whole-file errors the grammar cannot see.
#include "rpcgen_via/checker.h"

#include <gtest/gtest.h>

#include "rpcgen_via/driver.h"

namespace san::rpcgen {
namespace {

Diagnostic Fails(const std::string& text, bool newstyle = false) {
  Specification spec;
  Diagnostic error;
  EXPECT_FALSE(CompileText(text, "c.x", newstyle, &spec, &error)) << text;
  return error;
}

TEST(RpcgenViaChecker, AcceptsAWholeFile) {
  Specification spec;
  Diagnostic error;
  EXPECT_TRUE(
      CompileText("enum e { A, B }; struct s { e x; external_t y; };\n"
                  "program P { version V1 { int F(s) = 1; } = 1;"
                  " version V2 { int F(s) = 1; int G(int, int) = 2; } = 2; } = 9;",
                  "c.x", /*newstyle=*/true, &spec, &error))
      << error.ToString();
}

TEST(RpcgenViaChecker, Redefinitions) {
  Diagnostic e = Fails("struct a { int x; };\nenum a { Q };");
  EXPECT_EQ(e.ToString(),
            "c.x:2:1: error: redefinition of 'a' as an enum (first defined at c.x:1:1)");
  e = Fails("enum e { A };\nconst A = 3;");
  EXPECT_EQ(e.pos.line, 2);
  e = Fails("struct s { int x; int x; };");
  EXPECT_NE(e.message.find("duplicate member 'x'"), std::string::npos);
  EXPECT_EQ(e.pos.column, 19);
}

TEST(RpcgenViaChecker, UnionLabels) {
  const Diagnostic e = Fails("union u switch (int d) { case 1: int a; case 1: int b; };");
  EXPECT_NE(e.message.find("duplicate case value '1'"), std::string::npos);
}

TEST(RpcgenViaChecker, DiscriminantMustBeScalar) {
  Diagnostic e = Fails("struct s { int a; };\nunion u switch (s d) { case 1: void; };");
  EXPECT_EQ(e.pos.line, 2);
  EXPECT_EQ(e.pos.column, 17);
  EXPECT_NE(e.message.find("must be int, unsigned int, bool or an enum"), std::string::npos);
  e = Fails("typedef double real;\nunion u switch (real d) { case 1: void; };");
  EXPECT_EQ(e.pos.line, 2);
  Specification spec;
  EXPECT_TRUE(CompileText("enum e { A }; typedef e e2; union u switch (e2 d) { case A: void; };",
                          "c.x", false, &spec, &e))
      << e.ToString();
}

TEST(RpcgenViaChecker, ProgramNumbers) {
  Diagnostic e = Fails("program P { version V { int F(int) = 1; int G(int) = 1; } = 1; } = 9;");
  EXPECT_NE(e.message.find("duplicate procedure number 1"), std::string::npos);
  e = Fails(
      "program P { version V { int F(int) = 1; } = 1; version W { int G(int) = 2; } = 1; } = 9;");
  EXPECT_NE(e.message.find("duplicate version number 1"), std::string::npos);
  e = Fails(
      "program P { version V { int F(int) = 1; } = 1; version W { int F(int) = 2; } = 2; } = 9;");
  EXPECT_NE(e.message.find("has number 2 here but 1"), std::string::npos);
}

TEST(RpcgenViaChecker, SeveralArgumentsNeedNewstyle) {
  const Diagnostic e = Fails("program P { version V {\n  int F(int, int) = 1; } = 1; } = 9;");
  EXPECT_EQ(e.pos.line, 2);
  EXPECT_EQ(e.pos.column, 3);
  EXPECT_NE(e.message.find("-N"), std::string::npos);
}

}  // namespace
}  // namespace san::rpcgen
