#include "ftp/protocol/ascii.h"

#include <cstring>

namespace san::ftp {

void AsciiEncode(const char* in, size_t n, std::string* out) {
  // Copy runs between LFs in one append each: text lines are long compared with a byte loop's cost.
  const char* end = in + n;
  while (in < end) {
    const char* lf = static_cast<const char*>(memchr(in, '\n', static_cast<size_t>(end - in)));
    if (!lf) {
      out->append(in, static_cast<size_t>(end - in));
      return;
    }
    out->append(in, static_cast<size_t>(lf - in)).append("\r\n");
    in = lf + 1;
  }
}

void AsciiDecoder::Decode(const char* in, size_t n, std::string* out) {
  for (size_t i = 0; i < n; ++i) {
    const char c = in[i];
    if (held_cr_) {
      held_cr_ = false;
      if (c != '\n') out->push_back('\r');  // a CR not followed by LF is data
    }
    if (c == '\r') {
      held_cr_ = true;
    } else {
      out->push_back(c);
    }
  }
}

void AsciiDecoder::Finish(std::string* out) {
  if (held_cr_) out->push_back('\r');
  held_cr_ = false;
}

}  // namespace san::ftp
