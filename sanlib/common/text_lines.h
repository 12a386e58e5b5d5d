// TextLines: a text made of lines (the settings file, drpc's host lists and command policies),
// walked line by line: numbered from 1 (for error messages), a '#' and everything after it on the
// line cut off. Blanks are left to the caller, whose syntax decides them.
// Thread-safety: one object per walk; the text must outlive it.
#pragma once

#include <string_view>

namespace san {

class TextLines {
 public:
  explicit TextLines(std::string_view text) : rest_(text) {}

  // The next line, without its comment and its '\n'; false at the end of the text.
  bool Next(std::string_view* line) {
    if (rest_.empty()) return false;
    ++number_;
    const size_t end = rest_.find('\n');
    *line = rest_.substr(0, end);
    rest_ = end == std::string_view::npos ? std::string_view() : rest_.substr(end + 1);
    if (const size_t hash = line->find('#'); hash != std::string_view::npos) {
      *line = line->substr(0, hash);
    }
    return true;
  }
  // The number of the line Next returned last.
  int number() const { return number_; }

 private:
  std::string_view rest_;
  int number_ = 0;
};

}  // namespace san
