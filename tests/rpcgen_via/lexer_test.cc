// Lexer: tokens, positions, cpp line markers, pass-through lines, and errors with positions.
#include "rpcgen_via/lexer.h"

#include <gtest/gtest.h>

namespace san::rpcgen {
namespace {

std::vector<Token> Lex(const std::string& text) {
  std::vector<Token> tokens;
  Diagnostic error;
  EXPECT_TRUE(Tokenize(text, "t.x", &tokens, &error)) << error.ToString();
  return tokens;
}

Diagnostic LexError(const std::string& text) {
  std::vector<Token> tokens;
  Diagnostic error;
  EXPECT_FALSE(Tokenize(text, "t.x", &tokens, &error));
  return error;
}

TEST(RpcgenViaLexer, TokensAndPositions) {
  const auto t = Lex("const X = 0x1F;\n  struct s { int a<>; };");
  ASSERT_EQ(t.size(), 16u);
  EXPECT_EQ(t[0].kind, TokenKind::kIdentifier);
  EXPECT_EQ(t[3].kind, TokenKind::kNumber);
  EXPECT_EQ(t[3].text, "0x1F");
  EXPECT_EQ(t[3].pos.column, 11);
  EXPECT_EQ(t[5].text, "struct");
  EXPECT_EQ(t[5].pos.line, 2);
  EXPECT_EQ(t[5].pos.column, 3);
  EXPECT_EQ(t.back().kind, TokenKind::kEnd);
}

TEST(RpcgenViaLexer, NegativeOctalAndStrings) {
  const auto t = Lex("-7 017 0 \"a\\\"b\"");
  EXPECT_EQ(t[0].text, "-7");
  EXPECT_EQ(t[1].text, "017");
  EXPECT_EQ(t[2].text, "0");
  EXPECT_EQ(t[3].kind, TokenKind::kString);
  EXPECT_EQ(t[3].text, "\"a\\\"b\"");
}

TEST(RpcgenViaLexer, CommentsAreSkipped) {
  const auto t = Lex("/* a\n b */ int // rest\nx");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].text, "int");
  EXPECT_EQ(t[0].pos.line, 2);
  EXPECT_EQ(t[1].pos.line, 3);
}

TEST(RpcgenViaLexer, LineMarkersRenameFileAndLine) {
  const auto t = Lex("# 40 \"/usr/include/foo.x\" 1\nint\n#line 7 \"b.x\"\n  x");
  EXPECT_EQ(t[0].pos.file, "/usr/include/foo.x");
  EXPECT_EQ(t[0].pos.line, 40);
  EXPECT_EQ(t[1].pos.file, "b.x");
  EXPECT_EQ(t[1].pos.line, 7);
  EXPECT_EQ(t[1].pos.column, 3);
}

// Found by the fuzzer: a line marker at the very end of the input put the end-of-file token on
// line 0, so the parser's "found end of file" error had line 0.
TEST(RpcgenViaLexer, MarkerAtEndOfInputKeepsLinesPositive) {
  const auto t = Lex("enum igh\n# 0a*/  noDt");
  EXPECT_GE(t.back().pos.line, 1);
  const auto u = Lex("# 0 \"<built-in>\"\nint");
  EXPECT_EQ(u[0].pos.line, 1);
}

TEST(RpcgenViaLexer, PassthroughLines) {
  const auto t = Lex("%#include <x.h>\n  %  indented\nint");
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].kind, TokenKind::kPassthrough);
  EXPECT_EQ(t[0].text, "#include <x.h>");
  EXPECT_EQ(t[1].text, "  indented");
  EXPECT_EQ(t[2].text, "int");
}

TEST(RpcgenViaLexer, PercentInsideALineIsAnError) {
  const Diagnostic e = LexError("int %x");
  EXPECT_EQ(e.pos.line, 1);
  EXPECT_EQ(e.pos.column, 5);
  EXPECT_NE(e.message.find("'%'"), std::string::npos);
}

TEST(RpcgenViaLexer, ErrorsCarryPositions) {
  Diagnostic e = LexError("int\n  x @");
  EXPECT_EQ(e.ToString(), "t.x:2:5: error: unexpected character '@'");
  e = LexError("const A = 09;");
  EXPECT_EQ(e.pos.column, 11);
  EXPECT_NE(e.message.find("octal"), std::string::npos);
  e = LexError("const A = 0x;");
  EXPECT_NE(e.message.find("hexadecimal"), std::string::npos);
  e = LexError("const A = 12ab;");
  EXPECT_EQ(e.pos.column, 13);
  e = LexError("\n/* open");
  EXPECT_EQ(e.pos.line, 2);
  EXPECT_NE(e.message.find("unterminated comment"), std::string::npos);
  e = LexError("const S = \"abc\n\";");
  EXPECT_NE(e.message.find("unterminated string"), std::string::npos);
  e = LexError(std::string("int \x01", 5));
  EXPECT_NE(e.message.find("\\x01"), std::string::npos);
  e = LexError(std::string("int \0", 5));
  EXPECT_NE(e.message.find("\\x00"), std::string::npos);
}

}  // namespace
}  // namespace san::rpcgen
