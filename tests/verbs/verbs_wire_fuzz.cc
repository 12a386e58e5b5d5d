// libFuzzer target for the verbs rendezvous's private data (fabric/verbs/verbs_wire.h): bytes a
// remote peer chooses. Built only with clang (san_add_fuzz_target); verbs_provider_test replays
// a seeded random corpus of the same shape under GCC.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "sanlib/fabric/verbs/verbs_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  san::Result<san::fabric::ConnectData> d = san::fabric::verbs::DecodeRequest(data, size);
  if (d.ok()) {
    // Whatever decodes re-encodes to the same leading bytes.
    const san::fabric::verbs::RequestBlob blob = san::fabric::verbs::EncodeRequest(d.value());
    if (std::memcmp(blob.bytes, data, 4 + d->length) != 0) __builtin_trap();
  }
  return 0;
}
