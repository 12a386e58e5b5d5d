// libFuzzer target over every drpc parser of outside input (clang only; see cmake/SanFuzz.cmake).
#include "parsers_fuzz_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  san::drpc::FuzzParsers(data, size);
  return 0;
}
