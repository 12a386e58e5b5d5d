// Rules (compat/rules.h): parsing with positioned errors, first-match evaluation, and a seeded
// random corpus replay of the parser (the fuzz target's inputs, for GCC builds and CI).
#include "compat/rules.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "support/inet.h"

namespace san::compat {
namespace {

using testing_support::Loopback;

Rules Parsed(const std::string& text) {
  Rules r;
  std::string error;
  EXPECT_TRUE(Rules::Parse(text, "test", &r, &error)) << error;
  return r;
}

std::string ParseError(const std::string& text) {
  Rules r;
  std::string error;
  EXPECT_FALSE(Rules::Parse(text, "test", &r, &error)) << text;
  return error;
}

sockaddr_in6 V6(const char* ip, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  return a;
}

sockaddr_in V4(const char* ip, uint16_t port) {
  sockaddr_in a = Loopback(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

Verdict At(const Rules& r, const char* prog, const sockaddr* addr, socklen_t len) {
  return r.Evaluate(RuleSubject{prog, addr, len});
}

// The verdict for a connection to `addr` (any sockaddr_in/sockaddr_in6).
template <typename Addr>
Verdict At(const Rules& r, const char* prog, const Addr& addr) {
  return At(r, prog, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
}

TEST(RulesTest, EmptyAllowsEverything) {
  Rules r = Parsed("");
  sockaddr_in a = Loopback(80);
  EXPECT_EQ(At(r, "curl", nullptr, 0), Verdict::kAllow);
  EXPECT_EQ(At(r, "curl", a), Verdict::kAllow);
  EXPECT_TRUE(Parsed("  ;\n# only a comment\n;;").empty());
}

TEST(RulesTest, FirstMatchWins) {
  Rules r = Parsed("deny port=22; allow prog=redis-*; deny");
  sockaddr_in ssh = Loopback(22), web = Loopback(80);
  auto* s = reinterpret_cast<sockaddr*>(&ssh);
  auto* w = reinterpret_cast<sockaddr*>(&web);
  EXPECT_EQ(At(r, "redis-server", s, sizeof ssh), Verdict::kDeny);   // rule 1
  EXPECT_EQ(At(r, "redis-server", w, sizeof web), Verdict::kAllow);  // rule 2
  EXPECT_EQ(At(r, "curl", w, sizeof web), Verdict::kDeny);           // rule 3
}

TEST(RulesTest, AddressConditionsWaitForAnAddress) {
  // At socket() only the program is known: "deny port=22" cannot decide yet, "deny" can.
  Rules r = Parsed("deny port=22\nallow prog=nginx\ndeny");
  EXPECT_EQ(At(r, "nginx", nullptr, 0), Verdict::kAllow);
  EXPECT_EQ(At(r, "curl", nullptr, 0), Verdict::kDeny);
  Rules only_port = Parsed("deny port=22");
  EXPECT_EQ(At(only_port, "sshd", nullptr, 0), Verdict::kAllow);
}

TEST(RulesTest, PortRangesAndPrefixes) {
  Rules r = Parsed(
      "deny port=6000-6009 addr=127.0.0.0/8; deny addr=10.1.0.0/16; "
      "deny addr=fd00::/8 port=443");
  sockaddr_in x = Loopback(6005), y = Loopback(6010);
  EXPECT_EQ(At(r, "p", x), Verdict::kDeny);
  EXPECT_EQ(At(r, "p", y), Verdict::kAllow);
  EXPECT_EQ(At(r, "p", V4("10.1.200.3", 80)), Verdict::kDeny);
  EXPECT_EQ(At(r, "p", V4("10.2.0.3", 80)), Verdict::kAllow);
  sockaddr_in6 ula = V6("fd12::1", 443), other = V6("fe80::1", 443), ula80 = V6("fd12::1", 80);
  EXPECT_EQ(At(r, "p", ula), Verdict::kDeny);
  EXPECT_EQ(At(r, "p", other), Verdict::kAllow);
  EXPECT_EQ(At(r, "p", ula80), Verdict::kAllow);
}

TEST(RulesTest, MappedAddressesCountAsIpv4) {
  Rules r = Parsed("deny addr=127.0.0.1");
  sockaddr_in6 mapped = V6("::ffff:127.0.0.1", 80);
  EXPECT_EQ(At(r, "p", mapped), Verdict::kDeny);
}

TEST(RulesTest, PrefixBitsInsideAByte) {
  Rules r = Parsed("deny addr=192.168.1.128/25");
  EXPECT_EQ(At(r, "p", V4("192.168.1.200", 80)), Verdict::kDeny);
  EXPECT_EQ(At(r, "p", V4("192.168.1.100", 80)), Verdict::kAllow);
}

TEST(RulesTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(ParseError("allow\nblock port=1"), "test:2:1: a rule starts with 'allow' or 'deny'");
  EXPECT_EQ(ParseError("deny port=70000"),
            "test:1:6: port= takes one port N or range N-M (0..65535, N <= M)");
  EXPECT_EQ(ParseError("deny  port=9-3").substr(0, 9), "test:1:7:");
  EXPECT_EQ(ParseError("deny addr=300.1.1.1").substr(0, 9), "test:1:6:");
  EXPECT_EQ(ParseError("deny addr=10.0.0.0/33").substr(0, 9), "test:1:6:");
  EXPECT_EQ(ParseError("deny prog").substr(0, 9), "test:1:6:");
  EXPECT_EQ(ParseError("deny colour=red"), "test:1:6: unknown condition (prog=, port=, addr=)");
  EXPECT_EQ(ParseError("deny port=1 port=2").substr(0, 10), "test:1:13:");
  EXPECT_EQ(ParseError("deny prog="), "test:1:6: prog= needs one non-empty pattern");
}

TEST(RulesTest, FailedParseLeavesOutputUntouched) {
  Rules r = Parsed("deny");
  std::string error;
  EXPECT_FALSE(Rules::Parse("allow bogus", "x", &r, &error));
  EXPECT_EQ(r.rules().size(), 1u);
}

// The fuzz corpus, replayed: random mixes of the grammar's pieces and raw bytes. The parser must
// return (true or false with an error naming a position), never crash or loop.
TEST(RulesTest, RandomInputsNeverCrash) {
  const char* pieces[] = {"allow", "deny",  " ",     "\t",        ";",       "\n",   "#",
                          "prog=", "port=", "addr=", "*",         "-",       "/",    "1",
                          "65535", "99999", "::",    "127.0.0.1", "fe80::1", "/129", "=",
                          "x",     "\r",    "\0",    "\xff"};
  std::mt19937 rng(20261123);
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    const int n = static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) {
      if (rng() % 5 == 0) {
        text.push_back(static_cast<char>(rng() % 256));
      } else {
        text.append(pieces[rng() % (sizeof pieces / sizeof *pieces)]);
      }
    }
    Rules r;
    std::string error;
    if (!Rules::Parse(text, "fuzz", &r, &error)) {
      EXPECT_EQ(error.rfind("fuzz:", 0), 0u) << error;
    } else {
      sockaddr_in a = Loopback(static_cast<uint16_t>(rng()));
      r.Evaluate(RuleSubject{"prog", reinterpret_cast<sockaddr*>(&a), sizeof a});
    }
  }
}

}  // namespace
}  // namespace san::compat
