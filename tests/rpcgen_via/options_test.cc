// Command line: rpcgen's single-letter options, bundled or separate, and clear refusals.
#include "rpcgen_via/options.h"

#include <gtest/gtest.h>

namespace san::rpcgen {
namespace {

bool ParseArgs(std::vector<const char*> args, Options* o, std::string* error) {
  args.insert(args.begin(), "rpcgen_via");
  return ParseOptions(static_cast<int>(args.size()), args.data(), o, error);
}

TEST(RpcgenViaOptions, DefaultGeneratesEverything) {
  Options o;
  std::string error;
  ASSERT_TRUE(ParseArgs({"foo.x"}, &o, &error)) << error;
  EXPECT_TRUE(o.all_files);
  EXPECT_FALSE(o.samples);
  EXPECT_EQ(o.infile, "foo.x");
}

TEST(RpcgenViaOptions, BundledAndAttachedValues) {
  Options o;
  std::string error;
  ASSERT_TRUE(ParseArgs({"-aNM", "-stcp", "-s", "udp", "-DX=1", "-D", "Y", "-K", "30", "-I", "-L",
                         "-C", "-i", "5", "foo.x"},
                        &o, &error))
      << error;
  EXPECT_TRUE(o.samples && o.newstyle && o.mt_safe && o.inetd && o.syslog_errors);
  EXPECT_EQ(o.nettypes, (std::vector<std::string>{"tcp", "udp"}));
  EXPECT_EQ(o.defines, (std::vector<std::string>{"X=1", "Y"}));
  EXPECT_EQ(o.closedown_seconds, 30);
  EXPECT_TRUE(o.all_files);
}

TEST(RpcgenViaOptions, SingleFileModes) {
  Options o;
  std::string error;
  ASSERT_TRUE(ParseArgs({"-c", "-o", "out.c", "foo.x"}, &o, &error)) << error;
  EXPECT_TRUE(o.single);
  EXPECT_EQ(o.kind, OutputKind::kXdr);
  EXPECT_EQ(o.outfile, "out.c");
  ASSERT_TRUE(ParseArgs({"-s", "netpath", "foo.x"}, &o, &error)) << error;
  EXPECT_EQ(o.kind, OutputKind::kServer);
  ASSERT_TRUE(ParseArgs({"-m", "-s", "tcp", "foo.x"}, &o, &error)) << error;
  EXPECT_EQ(o.kind, OutputKind::kServerNoMain);
  ASSERT_TRUE(ParseArgs({"-Sc", "foo.x"}, &o, &error)) << error;
  EXPECT_EQ(o.kind, OutputKind::kSampleClient);
  ASSERT_TRUE(ParseArgs({"-h"}, &o, &error)) << error;  // standard input
  EXPECT_EQ(o.infile, "");
}

TEST(RpcgenViaOptions, Refusals) {
  Options o;
  std::string error;
  const std::vector<std::vector<const char*>> bad = {
      {"-c", "-h", "foo.x"},  {"-o", "x.c", "foo.x"}, {"-t", "foo.x"},
      {"-n", "tcp", "foo.x"}, {"-K", "abc", "foo.x"}, {"-s"},
      {"-Sx", "foo.x"},       {"-q", "foo.x"},        {"foo.y"},
      {"a.x", "b.x"},         {"-a", "-c", "foo.x"},  {},
      {"-D", "=1", "foo.x"}};
  for (const auto& args : bad) {
    EXPECT_FALSE(ParseArgs(args, &o, &error)) << (args.empty() ? "(none)" : args[0]);
    EXPECT_FALSE(error.empty());
  }
}

}  // namespace
}  // namespace san::rpcgen
