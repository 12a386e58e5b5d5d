// Wire compatibility with the system rpcgen: for each .x file, the fixture program built from the
// system rpcgen's XDR routines and the one built from ours (same value generator, see
// xdr_fixture_gen.cc) must encode identical bytes for every type and seed, and each must decode
// the other's bytes and re-encode them unchanged.
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <vector>

namespace {

std::vector<std::string> Names() {
  std::vector<std::string> names;
  std::stringstream in(RPCGEN_VIA_WIRE_NAMES);
  std::string n;
  while (std::getline(in, n, ',')) names.push_back(n);
  return names;
}

// Runs a shell command, returns its standard output; *status gets the exit status.
std::string RunCommand(const std::string& command, int* status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) {
    *status = -1;
    return out;
  }
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> lines;
  std::stringstream in(s);
  std::string l;
  while (std::getline(in, l)) lines.push_back(l);
  return lines;
}

std::string Program(const char* flavor, const std::string& name) {
  return std::string(RPCGEN_VIA_BIN_DIR) + "/rpcgen_via_xdr_" + flavor + "_" + name;
}

class RpcgenViaWire : public ::testing::TestWithParam<std::string> {};

TEST_P(RpcgenViaWire, SameBytesAndCrossDecode) {
  const std::string name = GetParam();
  int status = 0;
  const std::string sys = RunCommand(Program("sys", name) + " encode", &status);
  ASSERT_EQ(status, 0) << "system rpcgen's routines failed to encode:\n" << sys;
  const std::string via = RunCommand(Program("via", name) + " encode", &status);
  ASSERT_EQ(status, 0) << "rpcgen_via's routines failed to encode:\n" << via;

  const std::vector<std::string> s = Lines(sys), v = Lines(via);
  ASSERT_GE(s.size(), 12u) << "no type of " << name << ".x was exercised";
  ASSERT_EQ(s.size(), v.size());
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i], v[i]) << "line " << i << " of " << name;

  // Each side decodes the other's bytes.
  char path[] = "/tmp/rpcgen_via_wire_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, sys.data(), sys.size()), static_cast<ssize_t>(sys.size()));
  close(fd);
  const std::string d1 = RunCommand(Program("via", name) + " decode < " + path, &status);
  EXPECT_EQ(status, 0) << "rpcgen_via's routines on the system's bytes:\n" << d1;
  const std::string d2 = RunCommand(Program("sys", name) + " decode < " + path, &status);
  EXPECT_EQ(status, 0) << "system routines on their own bytes:\n" << d2;
  unlink(path);
  EXPECT_NE(d1.find("checked " + std::to_string(s.size()) + " failures 0"), std::string::npos)
      << d1;
}

// Decoding must also reject what is not valid: a truncated encoding fails in both.
TEST_P(RpcgenViaWire, TruncatedInputIsRejectedByBoth) {
  const std::string name = GetParam();
  int status = 0;
  const std::vector<std::string> lines =
      Lines(RunCommand(Program("sys", name) + " encode", &status));
  ASSERT_EQ(status, 0);
  std::string truncated;
  for (const std::string& l : lines) {
    const size_t hex = l.rfind(' ') + 1;
    if (l.size() - hex >= 8)
      truncated += l.substr(0, l.size() - 8) + "\n";  // drop the last 4 bytes
  }
  ASSERT_FALSE(truncated.empty());
  char path[] = "/tmp/rpcgen_via_trunc_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, truncated.data(), truncated.size()), static_cast<ssize_t>(truncated.size()));
  close(fd);
  const std::string a = RunCommand(Program("via", name) + " decode < " + path, &status);
  const int via_status = status;
  const std::string b = RunCommand(Program("sys", name) + " decode < " + path, &status);
  unlink(path);
  EXPECT_NE(via_status, 0) << a;
  EXPECT_NE(status, 0) << b;
  // Same verdict per value (both reject the same ones; the rest round-trip).
  EXPECT_EQ(a, b);
}

INSTANTIATE_TEST_SUITE_P(RpcgenViaRealX, RpcgenViaWire, ::testing::ValuesIn(Names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
