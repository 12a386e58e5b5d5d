// The exec inheritance record (socket/exec_image.h): round trips, every refusal, and a replay of a
// seeded random corpus (the fuzz target's inputs, for GCC builds and CI): mutated valid records
// and raw bytes must decode or be refused, never crash.
#include "sanlib/socket/exec_image.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace san::exec {
namespace {

InheritedSocket Sample(int base, size_t state_bytes) {
  InheritedSocket s;
  s.numbers = {base, base + 1};
  s.nonblocking = true;
  s.read_shut = base % 2 == 0;
  s.endpoint_fds = {base + 100, base + 101, base + 102, base + 103};
  s.image.params.window = 32;
  s.image.params.combine.enabled = false;
  s.image.provider_caps = 0x1f;
  s.image.recv_region.length = 4096;
  s.image.staging_region.length = 8192;
  s.image.endpoint.state.assign(state_bytes, std::byte{0x5a});
  s.image.state.assign(state_bytes / 2 + 1, std::byte{0xa5});
  return s;
}

// A record list (records own fds' images: moved, not copied).
template <typename... T>
std::vector<InheritedSocket> List(T&&... s) {
  std::vector<InheritedSocket> v;
  (v.push_back(std::move(s)), ...);
  return v;
}

std::span<const std::byte> Span(const std::vector<std::byte>& v) { return {v.data(), v.size()}; }

TEST(ExecImageTest, RoundTrip) {
  std::vector<InheritedSocket> in = List(Sample(3, 100), Sample(10, 0));
  in[1].close_on_arrival = true;
  in[1].numbers = {40};
  const std::vector<std::byte> bytes = EncodeInheritance(in);
  Result<std::vector<InheritedSocket>> out = DecodeInheritance(Span(bytes));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const InheritedSocket& a = in[i];
    const InheritedSocket& b = out.value()[i];
    EXPECT_EQ(a.numbers, b.numbers);
    EXPECT_EQ(a.endpoint_fds, b.endpoint_fds);
    EXPECT_EQ(a.close_on_arrival, b.close_on_arrival);
    EXPECT_EQ(a.nonblocking, b.nonblocking);
    EXPECT_EQ(a.read_shut, b.read_shut);
    EXPECT_EQ(a.image.endpoint.state, b.image.endpoint.state);
    EXPECT_EQ(a.image.state, b.image.state);
    EXPECT_EQ(a.image.params.window, b.image.params.window);
    EXPECT_EQ(a.image.params.combine.enabled, b.image.params.combine.enabled);
    EXPECT_EQ(a.image.provider_caps, b.image.provider_caps);
    EXPECT_EQ(a.image.recv_region.length, b.image.recv_region.length);
  }
  EXPECT_TRUE(DecodeInheritance(Span(EncodeInheritance(List()))).ok());
}

TEST(ExecImageTest, RefusesWhatThisBuildDidNotWrite) {
  const std::vector<std::byte> good = EncodeInheritance(List(Sample(3, 64)));
  // Every truncation, and one byte too many.
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(DecodeInheritance(Span(good).first(n)).ok()) << n;
  }
  std::vector<std::byte> longer = good;
  longer.push_back(std::byte{0});
  EXPECT_EQ(DecodeInheritance(Span(longer)).status().code(), EINVAL);
  // Wrong magic.
  std::vector<std::byte> bad = good;
  bad[0] ^= std::byte{1};
  EXPECT_FALSE(DecodeInheritance(Span(bad)).ok());
  // An fd number twice (a socket number reused as an endpoint fd), and a negative one.
  InheritedSocket twice = Sample(3, 8);
  twice.endpoint_fds[0] = 3;
  EXPECT_FALSE(DecodeInheritance(Span(EncodeInheritance(List(twice)))).ok());
  InheritedSocket negative = Sample(3, 8);
  negative.numbers[1] = -1;
  EXPECT_FALSE(DecodeInheritance(Span(EncodeInheritance(List(negative)))).ok());
  // Two records naming the same number.
  EXPECT_FALSE(DecodeInheritance(Span(EncodeInheritance(List(Sample(3, 8), Sample(4, 8))))).ok());
  // A record with no number at all.
  InheritedSocket none = Sample(3, 8);
  none.numbers.clear();
  EXPECT_FALSE(DecodeInheritance(Span(EncodeInheritance(List(none)))).ok());
}

// The fuzz corpus, replayed: mutations of valid records (bit flips, overwritten words, cuts and
// splices) and raw random bytes. Decoding must never crash; what decodes re-encodes to the input.
TEST(ExecImageTest, RandomCorpusReplay) {
  std::mt19937 rng(20261123);
  const std::vector<std::byte> seeds[] = {
      EncodeInheritance(List(Sample(3, 64))),
      EncodeInheritance(List(Sample(0, 0), Sample(20, 300))),
      EncodeInheritance(List()),
  };
  int decoded = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<std::byte> input = seeds[rng() % 3];
    switch (rng() % 5) {
      case 0:  // flip bits
        for (int i = 0, n = 1 + static_cast<int>(rng() % 4); i < n && !input.empty(); ++i) {
          input[rng() % input.size()] ^= std::byte(1u << (rng() % 8));
        }
        break;
      case 1:  // overwrite a word (counts, lengths, fd numbers)
        if (input.size() >= 4) {
          const uint32_t v = rng() % 3 == 0 ? 0xffffffffu : rng() % 70000;
          memcpy(input.data() + rng() % (input.size() - 3), &v, 4);
        }
        break;
      case 2:  // cut
        input.resize(input.empty() ? 0 : rng() % input.size());
        break;
      case 3:  // splice another seed's tail on
      {
        const std::vector<std::byte>& tail = seeds[rng() % 3];
        input.insert(input.end(), tail.begin(), tail.end());
      } break;
      default:  // raw bytes
        input.resize(rng() % 600);
        for (std::byte& b : input) b = std::byte(rng());
        break;
    }
    Result<std::vector<InheritedSocket>> out = DecodeInheritance(Span(input));
    if (out.ok()) {
      ++decoded;
      EXPECT_EQ(EncodeInheritance(out.value()).size(), input.size());
    }
  }
  EXPECT_GT(decoded, 0);  // some mutations (payload bytes) stay valid
}

}  // namespace
}  // namespace san::exec
