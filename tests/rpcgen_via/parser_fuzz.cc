// libFuzzer target for the RPC-language front end (lexer, parser, checker) and the emitters it
// feeds; see fuzz_check.h for the property. Built only by compilers that support
// -fsanitize=fuzzer (clang); not a ctest. Run, e.g.:
//   CC=clang CXX=clang++ cmake -B build/fuzz -DSAN_SANITIZE=address &&
//   cmake --build build/fuzz --target rpcgen_via_parser_fuzz &&
//   build/fuzz/bin/rpcgen_via_parser_fuzz -max_total_time=60 tests/rpcgen_via/x
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks -N (several arguments allowed) so both checker modes are reached.
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (!san::rpcgen::FrontEndBehaves(text, (data[0] & 1) != 0)) __builtin_trap();
  return 0;
}
