// libFuzzer target for the exec inheritance record decoder (socket/exec_image.h): the memfd an
// exec leaves is input to the new image; a bad one must be refused, never crash it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sanlib/socket/exec_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto decoded = san::exec::DecodeInheritance(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(data), size));
  if (decoded.ok()) {
    // What decodes must encode back to the same bytes (nothing is invented or dropped).
    const auto again = san::exec::EncodeInheritance(decoded.value());
    if (again.size() != size) __builtin_trap();
  }
  return 0;
}
