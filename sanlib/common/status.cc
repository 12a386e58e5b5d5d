#include "sanlib/common/status.h"

#include <string.h>

namespace san {

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out = call_;
  out += ": ";
  out += strerrordesc_np(code_) ? strerrordesc_np(code_) : "unknown error";
  out += " (";
  out += strerrorname_np(code_) ? strerrorname_np(code_) : std::to_string(code_);
  out += ")";
  return out;
}

}  // namespace san
