// drpc_core: targets, host lists and files, the command policy, remote paths, tokens, the CLI.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <random>
#include <vector>

#include "drpc/client/output.h"
#include "drpc/core/checksum.h"
#include "drpc/core/cli_options.h"
#include "drpc/core/command_policy.h"
#include "drpc/core/hostfile.h"
#include "drpc/core/remote_path.h"
#include "drpc/core/target.h"
#include "drpc/core/token.h"
#include "process.h"

namespace san::drpc {
namespace {

TEST(DrpcTarget, SchemesHostsAndPorts) {
  Result<Target> t = ParseTarget("san://node1:9000");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->san);
  EXPECT_EQ(t->host, "node1");
  EXPECT_EQ(t->port, 9000);
  t = ParseTarget("10.0.0.7");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->san);
  EXPECT_EQ(t->port, kDefaultPort);
  t = ParseTarget("tcp://[fe80::1%eth0]:77");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->host, "fe80::1%eth0");
  EXPECT_EQ(t->port, 77);
  t = ParseTarget("san://[::1]");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->san);
  EXPECT_EQ(t->host, "::1");
  EXPECT_EQ(t->spec, "san://[::1]");
  for (const char* bad : {"", "san://", "http://x:1", "x:", "x:0", "x:65536", "x:12ab", "[::1",
                          "[::1]x", "a b", "::1", "x:1:2", "san://x/y", "[]:4"}) {
    EXPECT_FALSE(ParseTarget(bad).ok()) << bad;
  }
  EXPECT_TRUE(ParseListenAddress("0.0.0.0:0").ok());
  EXPECT_FALSE(ParseListenAddress("san://0.0.0.0:1").ok());
}

TEST(DrpcHosts, ListAndFile) {
  Result<std::vector<Target>> l = ParseHostList("san://a:1,b,c:3");
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[1].host, "b");
  EXPECT_FALSE(ParseHostList("a,,b").ok());
  EXPECT_FALSE(ParseHostList("a,").ok());
  EXPECT_FALSE(ParseHostList("a:5,a:5").ok());
  EXPECT_TRUE(ParseHostList("a:5,san://a:5").ok());  // two transports to one node: allowed
  int line = 0;
  Result<std::vector<Target>> f =
      ParseHostFile("# nodes\n n1 n2:8\r\n\n\tsan://n3 # fast\n", &line);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->size(), 3u);
  EXPECT_EQ((*f)[2].spec, "san://n3");
  EXPECT_FALSE(ParseHostFile("n1\nn2\nbad:port\n", &line).ok());
  EXPECT_EQ(line, 3);
  EXPECT_FALSE(ParseHostFile("# nobody\n", &line).ok());
}

TEST(DrpcPolicy, EmptyAllowsNothingPatternsMatchArgv0) {
  CommandPolicy none;
  EXPECT_FALSE(none.Allows("/bin/true"));
  int line = 0;
  Result<CommandPolicy> p =
      CommandPolicy::Parse("# ops\n/usr/bin/uptime\n  hostname  \n/opt/jobs/*\n", &line);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->Allows("/usr/bin/uptime"));
  EXPECT_TRUE(p->Allows("hostname"));
  EXPECT_TRUE(p->Allows("/opt/jobs/a/b"));  // no FNM_PATHNAME: '*' crosses '/'
  EXPECT_FALSE(p->Allows("uptime"));        // matched as sent, not by basename
  EXPECT_FALSE(p->Allows("/bin/sh"));
  EXPECT_FALSE(p->Allows(""));
  EXPECT_FALSE(p->Allows(std::string_view("hostname\0x", 10)));
  EXPECT_FALSE(CommandPolicy::Parse("ok\nbad pattern\n", &line).ok());
  EXPECT_EQ(line, 2);
  CommandPolicy all({"*"});
  EXPECT_TRUE(all.Allows("/anything"));
}

TEST(DrpcRemotePath, CanonicalAndNoDotDot) {
  EXPECT_EQ(CanonicalRemotePath("a/b").value(), "/a/b");
  EXPECT_EQ(CanonicalRemotePath("//a/./b//").value(), "/a/b");
  EXPECT_EQ(CanonicalRemotePath("/a..b/..c").value(), "/a..b/..c");
  EXPECT_EQ(CanonicalRemotePath("../etc/passwd").status().code(), EPERM);
  EXPECT_EQ(CanonicalRemotePath("a/../../b").status().code(), EPERM);
  EXPECT_EQ(CanonicalRemotePath("/").status().code(), EISDIR);
  EXPECT_EQ(CanonicalRemotePath("").status().code(), EINVAL);
  EXPECT_EQ(CanonicalRemotePath(std::string_view("a\0b", 3)).status().code(), EINVAL);
  EXPECT_EQ(CanonicalRemotePath(std::string(5000, 'a')).status().code(), EINVAL);
}

TEST(DrpcToken, ParseCompareAndFileMode) {
  EXPECT_EQ(ParseToken("  0123456789abcdef\n").value(), "0123456789abcdef");
  EXPECT_FALSE(ParseToken("short").ok());
  EXPECT_FALSE(ParseToken("0123456789 abcdef").ok());
  EXPECT_TRUE(TokenEquals("abc", "abc"));
  EXPECT_FALSE(TokenEquals("abc", "abd"));
  EXPECT_FALSE(TokenEquals("abc", "abcd"));
  EXPECT_EQ(TokenFromBearer(BearerHeader("tok")), "tok");
  EXPECT_EQ(TokenFromBearer("Basic tok"), "");
  EXPECT_EQ(TokenFromBearer("Bearer "), "");
  testing::TempDir dir;
  testing::WriteFile(dir.Join("t"), "0123456789abcdef0123\n", 0600);
  EXPECT_EQ(LoadTokenFile(dir.Join("t")).value(), "0123456789abcdef0123");
  chmod(dir.Join("t").c_str(), 0640);
  EXPECT_EQ(LoadTokenFile(dir.Join("t")).status().code(), EPERM);
  EXPECT_EQ(LoadTokenFile(dir.Join("missing")).status().code(), ENOENT);
}

CliParse Cli(std::vector<std::string> args) { return ParseCli(args); }

TEST(DrpcCli, GlobalOptionsAndCommands) {
  CliParse p =
      Cli({"--hosts", "a,b", "--json", "--timeout=2.5", "ping", "--size", "64", "--count", "3"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.options.command, Command::kPing);
  EXPECT_EQ(p.options.hosts, "a,b");
  EXPECT_TRUE(p.options.json);
  EXPECT_EQ(p.options.timeout_ms, 2500u);
  EXPECT_EQ(p.options.size, 64u);
  EXPECT_EQ(p.options.count, 3u);

  p = Cli({"-H", "n1", "exec", "--env", "A=1", "--env=B=x=y", "--cwd", "/tmp", "--cmd-timeout",
           "1.5", "ls", "-l", "--color", "/"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.options.argv, (std::vector<std::string>{"ls", "-l", "--color", "/"}));
  EXPECT_EQ(p.options.env.at("B"), "x=y");
  EXPECT_EQ(p.options.cwd, "/tmp");
  EXPECT_EQ(p.options.cmd_timeout_ms, 1500u);

  p = Cli({"--hostfile", "f", "submit", "--", "--weird-cmd", "x"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.options.argv, (std::vector<std::string>{"--weird-cmd", "x"}));

  p = Cli({"-H", "n", "push", "--mode", "0755", "--overwrite", "a", "b"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.options.mode, 0755u);
  EXPECT_TRUE(p.options.overwrite);
  EXPECT_EQ(p.options.local, "a");
  EXPECT_EQ(p.options.remote, "b");
  p = Cli({"-H", "n", "pull", "r", "l"});
  EXPECT_EQ(p.options.remote, "r");
  EXPECT_EQ(p.options.local, "l");
  p = Cli({"-H", "n", "wait", "--wait", "0", "42"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.options.task_id, 42u);
  EXPECT_EQ(p.options.wait_ms, 0u);
  EXPECT_TRUE(Cli({"--help"}).help);
  EXPECT_TRUE(Cli({"-H", "x", "--help", "ping"}).help);
}

TEST(DrpcCli, ErrorsAreClear) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "no command given"},
      {{"-H", "a"}, "no command given"},
      {{"ping"}, "exactly one of --hosts and --hostfile"},
      {{"-H", "a", "-f", "b", "ping"}, "exactly one of --hosts and --hostfile"},
      {{"-H", "a", "frobnicate"}, "unknown command 'frobnicate'"},
      {{"-H"}, "needs a value"},
      {{"-H", "a", "--timeout", "0", "ping"}, "--timeout is"},
      {{"-H", "a", "--timeout", "abc", "ping"}, "timeout"},
      {{"-H", "a", "--parallel", "0", "ping"}, "--parallel is"},
      {{"-H", "a", "--bogus", "ping"}, "bogus"},
      {{"-H", "a", "ping", "--size", "99999999"}, "--size is at most"},
      {{"-H", "a", "ping", "--count", "0"}, "--count is"},
      {{"-H", "a", "ping", "extra"}, "unexpected argument"},
      {{"-H", "a", "exec"}, "no command given"},
      {{"-H", "a", "exec", "--env", "NOEQUALS", "ls"}, "NAME=VALUE"},
      {{"-H", "a", "exec", "--cwd"}, "needs a value"},
      {{"-H", "a", "push", "only-one"}, "wants LOCAL REMOTE"},
      {{"-H", "a", "push", "--mode", "9", "a", "b"}, "octal"},
      {{"-H", "a", "wait", "x"}, "positive number"},
      {{"-H", "a", "wait", "0"}, "positive number"},
      {{"-H", "a", "cancel"}, "one TASK_ID"},
  };
  for (const auto& [args, expect] : cases) {
    const CliParse p = Cli(args);
    EXPECT_NE(p.error.find(expect), std::string::npos)
        << "args: " << ::testing::PrintToString(args) << " error: " << p.error;
  }
}

TEST(DrpcChecksum, Crc32cKnownValuesAndIncremental) {
  Checksum empty;
  EXPECT_EQ(empty.value(), 0u);
  Checksum a;
  a.Update("a", 1);
  EXPECT_EQ(a.value(), 0xc1d04330u);
  Checksum check;  // the CRC catalogue's check value of CRC-32/ISCSI
  check.Update("123456789", 9);
  EXPECT_EQ(check.value(), 0xe3069283u);
  Checksum whole, parts;
  whole.Update("hello world", 11);
  parts.Update("hello", 5);
  parts.Update(" world", 6);
  EXPECT_EQ(whole.value(), parts.value());
}

// The instruction path (three lanes joined by the shift table, for runs of 12 KiB and more) and
// the table path must give the same value for every length, alignment and starting register.
TEST(DrpcChecksum, HardwareAndSoftwareAgree) {
  if (!Crc32cHardwareAvailable()) GTEST_SKIP() << "no SSE4.2 crc32 on this CPU";
  std::mt19937_64 rng(7);
  std::vector<unsigned char> buf(3 * 3 * 4096 + 64);
  for (unsigned char& c : buf) c = static_cast<unsigned char>(rng());
  const size_t lens[] = {
      0, 1, 7, 8, 9, 4095, 3 * 4096 - 1, 3 * 4096, 3 * 4096 + 13, 6 * 4096 + 7, 9 * 4096};
  for (size_t len : lens) {
    for (size_t offset = 0; offset < 9; ++offset) {
      const uint32_t start = static_cast<uint32_t>(rng());
      EXPECT_EQ(Crc32cHardware(start, buf.data() + offset, len),
                Crc32cSoftware(start, buf.data() + offset, len))
          << "len " << len << " offset " << offset;
    }
  }
  // A whole buffer equals the same bytes given in uneven pieces.
  Checksum whole, pieces;
  whole.Update(buf.data(), buf.size());
  for (size_t at = 0, step = 1; at < buf.size(); at += step, step = step * 3 + 1) {
    pieces.Update(buf.data() + at, std::min(step, buf.size() - at));
  }
  EXPECT_EQ(whole.value(), pieces.value());
}

TEST(DrpcOutput, JsonStringEscapes) {
  EXPECT_EQ(JsonString("a\"b\\c\n\t\x01"), "\"a\\\"b\\\\c\\n\\t\\u0001\"");
  EXPECT_EQ(JsonString("caf\xc3\xa9"), "\"caf\xc3\xa9\"");
  EXPECT_EQ(JsonString("bad\xff\xc3"), "\"bad\\ufffd\\ufffd\"");
}

}  // namespace
}  // namespace san::drpc
