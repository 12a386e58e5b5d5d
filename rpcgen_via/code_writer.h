// CodeWriter: accumulates generated C text line by line.
//
// Lines are built from string pieces appended in order (no `"literal" + std::string`, which trips a
// GCC 12 -Wrestrict false positive), with a current indentation in tabs, like rpcgen's output.
// Thread-safety: none (one writer per output file). Owns its text.
#pragma once

#include <string>
#include <string_view>

namespace san::rpcgen {

class CodeWriter {
 public:
  // Appends one line: the indentation, then every piece, then '\n'. No pieces: an empty line.
  template <typename... Pieces>
  void Line(const Pieces&... pieces) {
    if constexpr (sizeof...(pieces) > 0) text_.append(static_cast<size_t>(indent_), '\t');
    (text_.append(std::string_view(pieces)), ...);
    text_.push_back('\n');
  }
  // Appends text as is (it may hold several lines).
  void Raw(std::string_view text) { text_.append(text); }

  void Indent() { ++indent_; }
  void Dedent() {
    if (indent_ > 0) --indent_;
  }

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  int indent_ = 0;
};

// Concatenates pieces into one string.
template <typename... Pieces>
std::string Cat(const Pieces&... pieces) {
  std::string s;
  (s.append(std::string_view(pieces)), ...);
  return s;
}

}  // namespace san::rpcgen
