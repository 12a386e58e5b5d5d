#include "rpcgen_via/lexer.h"

#include <cctype>
#include <cstdio>

namespace san::rpcgen {

namespace {

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Printable description of a byte for messages: 'x' or \xNN.
std::string Describe(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  if (std::isprint(u)) return std::string("'") + c + "'";
  char buf[8];
  snprintf(buf, sizeof buf, "\\x%02x", u);
  return buf;
}

class Scanner {
 public:
  Scanner(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  bool Run(std::vector<Token>* tokens, Diagnostic* error) {
    tokens->clear();
    while (true) {
      SkipBlanksAndComments();
      if (failed_) return Fail(error);
      if (at_ >= text_.size()) break;
      const char c = text_[at_];
      if (line_start_ && (c == '#' || c == '%')) {
        if (c == '#') {
          Directive();
        } else {
          Passthrough(tokens);
        }
        if (failed_) return Fail(error);
        continue;
      }
      line_start_ = false;
      if (IsIdentStart(c)) {
        Identifier(tokens);
      } else if (IsDigit(c) || (c == '-' && at_ + 1 < text_.size() && IsDigit(text_[at_ + 1]))) {
        Number(tokens);
      } else if (c == '"') {
        String(tokens);
      } else if (std::string_view("{}[]<>();,:=*").find(c) != std::string_view::npos && c != 0) {
        tokens->push_back(Token{TokenKind::kPunct, std::string(1, c), Here()});
        Advance();
      } else {
        SetError(Here(), "unexpected character " + Describe(c));
      }
      if (failed_) return Fail(error);
    }
    tokens->push_back(Token{TokenKind::kEnd, "", Here()});
    return true;
  }

 private:
  // A line marker at the very end of the input leaves line_ one short of its number: never report
  // a line below 1.
  SourcePos Here() const { return SourcePos{file_, line_ > 0 ? line_ : 1, column_}; }

  void Advance() {
    if (text_[at_] == '\n') {
      ++line_;
      column_ = 1;
      line_start_ = true;
    } else {
      ++column_;
    }
    ++at_;
  }

  void SetError(SourcePos pos, std::string message) {
    if (failed_) return;
    failed_ = true;
    error_ = Diagnostic{std::move(pos), std::move(message)};
  }

  bool Fail(Diagnostic* error) {
    *error = error_;
    return false;
  }

  void SkipBlanksAndComments() {
    while (at_ < text_.size() && !failed_) {
      const char c = text_[at_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v') {
        Advance();
      } else if (c == '/' && at_ + 1 < text_.size() && text_[at_ + 1] == '*') {
        const SourcePos start = Here();
        Advance();
        Advance();
        bool closed = false;
        while (at_ < text_.size()) {
          if (text_[at_] == '*' && at_ + 1 < text_.size() && text_[at_ + 1] == '/') {
            Advance();
            Advance();
            closed = true;
            break;
          }
          Advance();  // a comment leaves "at a line start" as it was (only tokens clear it)
        }
        if (!closed) SetError(start, "unterminated comment");
      } else if (c == '/' && at_ + 1 < text_.size() && text_[at_ + 1] == '/') {
        while (at_ < text_.size() && text_[at_] != '\n') Advance();
      } else {
        return;
      }
    }
  }

  std::string RestOfLine() {
    const size_t begin = at_;
    while (at_ < text_.size() && text_[at_] != '\n') Advance();
    return std::string(text_.substr(begin, at_ - begin));
  }

  // `# N "file" flags` or `#line N "file"` from cpp: the next line is line N of file. Any other
  // directive (e.g. #pragma, #ident left by cpp) is ignored, as rpcgen does.
  void Directive() {
    Advance();  // '#'
    std::string rest = RestOfLine();
    size_t i = 0;
    auto skip_blanks = [&] {
      while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t')) ++i;
    };
    skip_blanks();
    if (rest.compare(i, 4, "line") == 0) {
      i += 4;
      skip_blanks();
    }
    if (i >= rest.size() || !IsDigit(rest[i])) return;
    long line = 0;
    while (i < rest.size() && IsDigit(rest[i])) {
      line = line * 10 + (rest[i] - '0');
      if (line > 100000000) return;  // nonsense marker: ignore rather than overflow
      ++i;
    }
    skip_blanks();
    if (i < rest.size() && rest[i] == '"') {
      const size_t close = rest.find('"', i + 1);
      if (close != std::string::npos) file_ = rest.substr(i + 1, close - i - 1);
    }
    // The newline ending the directive is consumed by the blank skipper and counts one line, so
    // start one below the marker's number (cpp's `# 0 "<built-in>"` still yields line 1).
    line_ = line > 0 ? static_cast<int>(line) - 1 : 0;
  }

  void Passthrough(std::vector<Token>* tokens) {
    const SourcePos pos = Here();
    Advance();  // '%'
    tokens->push_back(Token{TokenKind::kPassthrough, RestOfLine(), pos});
  }

  // A C string literal on one line; escapes are kept as written for the C compiler.
  void String(std::vector<Token>* tokens) {
    const SourcePos pos = Here();
    const size_t begin = at_;
    Advance();
    while (at_ < text_.size() && text_[at_] != '"' && text_[at_] != '\n') {
      if (text_[at_] == '\\' && at_ + 1 < text_.size() && text_[at_ + 1] != '\n') Advance();
      Advance();
    }
    if (at_ >= text_.size() || text_[at_] != '"') return SetError(pos, "unterminated string");
    Advance();
    tokens->push_back(
        Token{TokenKind::kString, std::string(text_.substr(begin, at_ - begin)), pos});
  }

  void Identifier(std::vector<Token>* tokens) {
    const SourcePos pos = Here();
    const size_t begin = at_;
    while (at_ < text_.size() && IsIdentChar(text_[at_])) Advance();
    tokens->push_back(
        Token{TokenKind::kIdentifier, std::string(text_.substr(begin, at_ - begin)), pos});
  }

  void Number(std::vector<Token>* tokens) {
    const SourcePos pos = Here();
    const size_t begin = at_;
    if (text_[at_] == '-') Advance();
    const size_t digits = at_;
    if (text_[at_] == '0' && at_ + 1 < text_.size() &&
        (text_[at_ + 1] == 'x' || text_[at_ + 1] == 'X')) {
      Advance();
      Advance();
      const size_t hex = at_;
      while (at_ < text_.size() && std::isxdigit(static_cast<unsigned char>(text_[at_]))) Advance();
      if (at_ == hex) return SetError(pos, "hexadecimal constant has no digits");
    } else {
      while (at_ < text_.size() && IsDigit(text_[at_])) Advance();
      if (text_[digits] == '0') {
        for (size_t i = digits; i < at_; ++i) {
          if (text_[i] > '7') return SetError(pos, "invalid digit in octal constant");
        }
      }
    }
    if (at_ < text_.size() && IsIdentChar(text_[at_])) {
      return SetError(Here(), "invalid character " + Describe(text_[at_]) + " in number");
    }
    tokens->push_back(
        Token{TokenKind::kNumber, std::string(text_.substr(begin, at_ - begin)), pos});
  }

  std::string_view text_;
  std::string file_;
  size_t at_ = 0;
  int line_ = 1;
  int column_ = 1;
  bool line_start_ = true;
  bool failed_ = false;
  Diagnostic error_;
};

}  // namespace

bool Tokenize(std::string_view text, const std::string& file, std::vector<Token>* tokens,
              Diagnostic* error) {
  return Scanner(text, file).Run(tokens, error);
}

}  // namespace san::rpcgen
