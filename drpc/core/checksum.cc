#include "core/checksum.h"

namespace san::drpc {

void Checksum::Update(const void* data, size_t len) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = h_;
  for (size_t i = 0; i < len; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  h_ = h;
}

}  // namespace san::drpc
