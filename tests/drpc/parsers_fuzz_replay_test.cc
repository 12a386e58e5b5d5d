// Replays a seeded random corpus through the drpc parsers' fuzz body, so builds without libFuzzer
// (GCC, CI) exercise it too: inputs built from the parsers' own vocabulary (schemes, brackets,
// colons, dots, "..", '#', newlines, NULs as argument separators, option names) mutated at random.
#include <gtest/gtest.h>

#include <random>

#include "parsers_fuzz_body.h"

namespace san::drpc {
namespace {

TEST(DrpcParsersFuzzReplay, SeededCorpusKeepsEveryPromise) {
  static const char* const kPieces[] = {
      "san://", "tcp://", "http://", "[", "]", ":", "::1", "%eth0", "127.0.0.1", "node-1", "0",
      "65535", "65536", "7467", ",", " ", "\t", "\n", "\r", "#", "/", "//", ".", "..", "*", "?",
      "Bearer ", "0123456789abcdef", "", "--hosts", "-H", "--hostfile",
      "--json", "--timeout", "1.5", "ping", "exec", "push", "pull", "wait", "cancel", "submit",
      "status", "--", "--env", "A=B", "--size", "--count", "--mode", "755", "--wait", "42", "x"};
  constexpr size_t kCount = sizeof kPieces / sizeof kPieces[0];
  std::mt19937_64 rng(0x5eed'd4bcULL);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string input;
    const int parts = static_cast<int>(rng() % 12);
    for (int p = 0; p < parts; ++p) {
      const size_t which = rng() % (kCount + 3);
      if (which < kCount) {
        const char* piece = kPieces[which];
        if (piece[0] == '\0') {
          input.push_back('\0');  // the NUL piece: an argument separator for the CLI
        } else {
          input.append(piece);
        }
      } else {
        input.push_back(static_cast<char>(rng() % 256));  // a raw byte
      }
    }
    if (!input.empty() && rng() % 4 == 0) input[rng() % input.size()] ^= static_cast<char>(1 << (rng() % 8));
    FuzzParsers(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  }
  SUCCEED();
}

}  // namespace
}  // namespace san::drpc
