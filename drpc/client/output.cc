#include "drpc/client/output.h"

namespace san::drpc {

void Output::Line(const std::string& host, std::string_view text, bool to_stderr) {
  if (json_) return;
  std::lock_guard<std::mutex> lock(mu_);
  FILE* f = to_stderr ? stderr : stdout;
  fprintf(f, "%s: %.*s\n", host.c_str(), static_cast<int>(text.size()), text.data());
  fflush(f);
}

void HostStream::Write(std::string_view data) {
  partial_.append(data);
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    out_->Line(host_, std::string_view(partial_).substr(start, nl - start), to_stderr_);
  }
  partial_.erase(0, start);
  // A line longer than 64 KiB is printed in pieces rather than held without bound.
  if (partial_.size() > 64 * 1024) Flush();
}

void HostStream::Flush() {
  if (partial_.empty()) return;
  out_->Line(host_, partial_, to_stderr_);
  partial_.clear();
}

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (c == '\n') {
      out += "\\n";
      ++i;
    } else if (c == '\t') {
      out += "\\t";
      ++i;
    } else if (c == '\r') {
      out += "\\r";
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else {
      // Copy a well-formed UTF-8 sequence; replace anything else.
      size_t len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
      bool ok = len > 0 && i + len <= s.size();
      for (size_t k = 1; ok && k < len; ++k) {
        ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      }
      if (ok) {
        out.append(s.substr(i, len));
        i += len;
      } else {
        out += "\\ufffd";
        ++i;
      }
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace san::drpc
