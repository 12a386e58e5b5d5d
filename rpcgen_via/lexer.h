// Lexer for the RPC language, applied to the C preprocessor's output.
//
// Turns source text into tokens carrying their position in the user's file: cpp line markers
// (`# 12 "file.x"`) are followed so positions name the original file and line; `%` lines become
// pass-through tokens; comments (cpp -C keeps them) are skipped. Numbers are checked here (octal
// digits, hex digits, an optional leading '-'), so the parser sees only well-formed literals.
//
// Thread-safety: a pure function of its input. Never reads past the text it is given; any input
// (including NUL bytes and invalid UTF-8) yields tokens or one Diagnostic, never a crash.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rpcgen_via/ast.h"

namespace san::rpcgen {

enum class TokenKind {
  kIdentifier,   // also keywords: the parser decides by spelling
  kNumber,       // decimal, 0x hex or 0 octal, possibly negative; `text` as written
  kString,       // "..." (constants only, as rpcgen allows); `text` includes the quotes
  kPunct,        // one of { } [ ] < > ( ) ; , : = *
  kPassthrough,  // a `%` line; `text` is what follows the '%'
  kEnd,          // end of input (always the last token)
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  SourcePos pos;
};

// Tokenizes `text`, naming positions after `file` until a line marker says otherwise. On failure
// returns false and sets *error; *tokens is then unspecified.
bool Tokenize(std::string_view text, const std::string& file, std::vector<Token>* tokens,
              Diagnostic* error);

}  // namespace san::rpcgen
