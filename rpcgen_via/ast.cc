#include "rpcgen_via/ast.h"

namespace san::rpcgen {

std::string Diagnostic::ToString() const {
  std::string out = pos.file.empty() ? std::string("<input>") : pos.file;
  out.append(":").append(std::to_string(pos.line)).append(":").append(std::to_string(pos.column));
  out.append(": error: ").append(message);
  return out;
}

}  // namespace san::rpcgen
