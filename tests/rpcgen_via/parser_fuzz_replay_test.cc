// Replays a seeded random corpus through the front end (the libFuzzer target's property, for
// GCC/CI where libFuzzer is not available): mutations of real .x files (byte flips, token
// insertions, deletions, truncations, splices) and random bytes.
#include <gtest/gtest.h>

#include <random>

#include <unistd.h>

#include "fuzz_check.h"
#include "rpcgen_via/preprocess.h"

namespace san::rpcgen {
namespace {

// Seeds: the .x files as the compiler sees them, after the C preprocessor.
std::vector<std::string> Seeds() {
  std::vector<std::string> seeds;
  for (const std::string& f :
       {std::string(RPCGEN_VIA_TEST_X_DIR) + "/langtest.x",
        std::string("/usr/include/rpcsvc/nfs_prot.x"), std::string("/usr/include/rpcsvc/yp.x"),
        std::string("/usr/include/rpcsvc/nlm_prot.x")}) {
    if (access(f.c_str(), R_OK) != 0) continue;
    PreprocessRequest req;
    req.input = f;
    req.defines = {"RPC_HDR"};
    std::string text, error;
    if (Preprocess(req, &text, &error)) seeds.push_back(text);
  }
  return seeds;
}

const char* const kPieces[] = {
    "{",       "}",       "<",    ">",      "[",      "]",        "(",     ")",
    ";",       ",",       ":",    "=",      "*",      "%x\n",     "#",     "\"",
    "/*",      "*/",      "0x",   "-",      "09",     "struct",   "union", "switch",
    "case",    "default", "void", "string", "opaque", "unsigned", "hyper", "program",
    "version", "typedef", "enum", "const",  "\n",     "\0",       "\xff"};

std::string Mutate(std::string s, std::mt19937& rng) {
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int i = 0; i < edits; ++i) {
    const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
    switch (rng() % 5) {
      case 0:  // flip a byte
        if (!s.empty() && at < s.size()) s[at] = static_cast<char>(rng());
        break;
      case 1: {  // insert a token-ish piece
        const char* p = kPieces[rng() % (sizeof kPieces / sizeof *kPieces)];
        s.insert(at, p[0] == '\0' ? std::string(1, '\0') : std::string(p));
        break;
      }
      case 2:  // delete a run
        if (at < s.size()) s.erase(at, rng() % 32);
        break;
      case 3:  // truncate
        s.resize(at);
        break;
      default: {  // duplicate a run elsewhere
        if (s.empty()) break;
        const size_t from = rng() % s.size();
        s.insert(at, s.substr(from, rng() % 64));
        break;
      }
    }
  }
  return s;
}

TEST(RpcgenViaFuzzReplay, SeedsThemselvesAreAccepted) {
  ASSERT_FALSE(Seeds().empty());
  for (const std::string& s : Seeds()) {
    Specification spec;
    Diagnostic error;
    EXPECT_TRUE(CompileText(s, "seed.x", true, &spec, &error)) << error.ToString();
  }
}

TEST(RpcgenViaFuzzReplay, MutatedCorpus) {
  const std::vector<std::string> seeds = Seeds();
  ASSERT_FALSE(seeds.empty());
  std::mt19937 rng(20261123);
  int rejected = 0, accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    // A window of a big seed keeps each run cheap (the ASan build runs this too).
    const std::string& seed = seeds[static_cast<size_t>(i) % seeds.size()];
    size_t from = seed.size() > 4096 ? rng() % (seed.size() - 4096) : 0;
    from = from == 0 ? 0 : seed.find('\n', from) + 1;
    const std::string input = Mutate(seed.substr(from, 4096), rng);
    bool ok = false;
    Diagnostic error;
    ASSERT_TRUE(FrontEndBehaves(input, i % 2 == 0, &ok, &error))
        << "input #" << i << ": " << error.ToString();
    (ok ? accepted : rejected)++;
  }
  // The corpus must reach both outcomes, or it tests nothing.
  EXPECT_GT(rejected, 100);
  EXPECT_GT(accepted, 10);
}

TEST(RpcgenViaFuzzReplay, RandomBytes) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string input(rng() % 200, '\0');
    for (char& c : input)
      c = static_cast<char>(rng() % 4 == 0 ? rng() : "{}<>;:=*a1 \n%#"[rng() % 14]);
    ASSERT_TRUE(FrontEndBehaves(input, i % 2 == 0)) << "input #" << i;
  }
}

}  // namespace
}  // namespace san::rpcgen
