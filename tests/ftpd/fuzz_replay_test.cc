// Replays a seeded random corpus through the parsers' fuzz body (fuzz_body.h), so every compiler
// (GCC in CI) exercises what the libFuzzer target does: inputs built from FTP-shaped fragments
// (verbs, separators, digits, Telnet bytes, CR/LF/NUL, path pieces), mutated at random. The seed
// is fixed, so a failure reproduces; the input is printed on failure.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "fuzz_body.h"

namespace {

const std::vector<std::string> kFragments = {
    "USER ", "PASS ", "RETR ", "STOR ", "PORT ", "EPRT ", "EPSV", "PASV", "REST ", "CWD ", "LIST",
    "ABOR", "|1|", "|2|", "127.0.0.1", "::1", "|", ",", "0", "1", "255", "256", "65535", "99999",
    "..", "/", ".", "//", "../..", "a", " ", "\r", "\n", "\r\n", std::string(1, '\0'), "\xff",
    "\xff\xf4", "\xff\xfb", "%", "%2f", "%00", "%41", "ftp://", "@", ":", "[", "]", "$y$", "$6$",
    "#", "rw", "ro", "226 ", "226-", "(", ")", "|||", "-1", "+", "\xc3\xa9", "x", "123456789"};

std::string RandomInput(std::mt19937& rng) {
  std::string s;
  const int pieces = std::uniform_int_distribution<int>(0, 12)(rng);
  for (int i = 0; i < pieces; ++i) {
    if (rng() % 5 == 0) {
      s.push_back(static_cast<char>(rng() & 0xff));
    } else {
      s += kFragments[rng() % kFragments.size()];
    }
  }
  if (!s.empty() && rng() % 4 == 0) s[rng() % s.size()] = static_cast<char>(rng() & 0xff);
  return s;
}

TEST(FtpFuzzReplay, SeededRandomCorpus) {
  std::mt19937 rng(20261123);
  for (int i = 0; i < 20000; ++i) {
    const std::string in = RandomInput(rng);
    SCOPED_TRACE(::testing::PrintToString(in));
    san::ftp::fuzz::OneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  }
}

TEST(FtpFuzzReplay, EdgeInputs) {
  for (const std::string& in : {std::string(), std::string(5000, 'A'), std::string(5000, '/'),
                                std::string(3000, '.') + "/..", std::string("RETR ") + std::string(4200, 'x'),
                                std::string("\xff", 1), std::string(100, '\xff')}) {
    san::ftp::fuzz::OneInput(reinterpret_cast<const uint8_t*>(in.data()), in.size());
  }
}

}  // namespace
