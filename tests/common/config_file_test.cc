// The system-wide settings file (common/config_file.h): parsing, where errors are reported, and
// that the environment wins over the file.
#include "sanlib/common/config_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "support/fake_getenv.h"

namespace san {
namespace {

using testing_support::FakeEnvironment;
using testing_support::FakeGetenv;
using testing_support::UseFakeEnvironment;

constexpr const char* kPath = "/etc/sanlib/sanlib.conf";

TEST(ConfigFileTest, ReadsSettingsAndRulesWithTheirPlaces) {
  std::vector<std::string> errors;
  const ConfigFile f = ParseConfigFile(
      "# sanlib settings\n"
      "\n"
      "SAN_WINDOW = 64\n"
      "  SAN_LOG=debug   # trailing comment\n"
      "allow prog=redis-* port=6379\n"
      "\tdeny\n",
      kPath, &errors);
  EXPECT_TRUE(errors.empty()) << errors[0];
  ASSERT_EQ(f.settings.size(), 2u);
  EXPECT_EQ(f.settings[0].name, "SAN_WINDOW");
  EXPECT_EQ(f.settings[0].value, "64");
  EXPECT_EQ(f.settings[0].line, 3);
  EXPECT_EQ(f.settings[0].column, 14);
  EXPECT_EQ(f.settings[1].name, "SAN_LOG");
  EXPECT_EQ(f.settings[1].value, "debug");
  EXPECT_EQ(f.settings[1].line, 4);
  ASSERT_EQ(f.rules.size(), 2u);
  EXPECT_EQ(f.rules[0].value, "allow prog=redis-* port=6379");
  EXPECT_EQ(f.rules[0].line, 5);
  EXPECT_EQ(f.rules[1].value, "deny");
  EXPECT_EQ(f.rules[1].line, 6);
  EXPECT_EQ(f.rules[1].column, 2);
}

TEST(ConfigFileTest, UnusableLinesAreReportedWithFileLineColumnAndSkipped) {
  std::vector<std::string> errors;
  const ConfigFile f = ParseConfigFile(
      "SAN_WINDOW 64\n"
      "SAN_NOT_A_SETTING = 1\n"
      "  SAN_CONFIG_FILE = /tmp/other\n"
      "SAN_MTU = 65536\n",
      kPath, &errors);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0].rfind("/etc/sanlib/sanlib.conf:1:1: expected SAN_NAME = value", 0), 0u)
      << errors[0];
  EXPECT_EQ(errors[1].rfind("/etc/sanlib/sanlib.conf:2:1: unknown setting 'SAN_NOT_A_SETTING'", 0),
            0u)
      << errors[1];
  EXPECT_EQ(errors[2].rfind("/etc/sanlib/sanlib.conf:3:3: SAN_CONFIG_FILE can only be set", 0), 0u)
      << errors[2];
  for (const std::string& e : errors) EXPECT_NE(e.find("; line ignored"), std::string::npos);
  ASSERT_EQ(f.settings.size(), 1u);  // the good line still applies
  EXPECT_EQ(f.settings[0].name, "SAN_MTU");
}

TEST(ConfigFileTest, TheEnvironmentWinsOverTheFile) {
  const FakeEnvironment env{{"SAN_WINDOW", "128"}};
  UseFakeEnvironment(env);
  std::vector<std::string> errors;
  const ConfigFile f =
      ParseConfigFile("SAN_WINDOW = 64\nSAN_MTU = 65536\nallow port=80\n", kPath, &errors);
  const Config c = ParseWithFile(FakeGetenv, f, &errors);
  EXPECT_TRUE(errors.empty()) << errors[0];
  EXPECT_EQ(c.window, 128u);  // the environment's
  EXPECT_EQ(c.mtu, 65536u);   // the file's: the environment leaves it unset
  EXPECT_EQ(c.config_file, kPath);
  ASSERT_EQ(c.file_rules.size(), 1u);
  EXPECT_EQ(c.file_rules[0].text, "allow port=80");
  EXPECT_EQ(c.file_rules[0].line, 3);
}

TEST(ConfigFileTest, ABadValueIsReportedWhereItIsAndTheDefaultKept) {
  const FakeEnvironment env;
  UseFakeEnvironment(env);
  std::vector<std::string> errors;
  const ConfigFile f =
      ParseConfigFile("SAN_MTU = 65536\n\nSAN_WINDOW = lots\nSAN_LOG = chatty\n", kPath, &errors);
  const Config c = ParseWithFile(FakeGetenv, f, &errors);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "/etc/sanlib/sanlib.conf:3:14: SAN_WINDOW=lots is not valid; line ignored");
  EXPECT_EQ(errors[1], "/etc/sanlib/sanlib.conf:4:11: SAN_LOG=chatty is not valid; line ignored");
  EXPECT_EQ(c.window, 32u);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_EQ(c.mtu, 65536u);
}

TEST(ConfigFileTest, SanConfigFileChoosesTheFile) {
  FakeEnvironment env;
  UseFakeEnvironment(env);
  EXPECT_EQ(ConfigFilePath(FakeGetenv), SystemConfigFile());
  env["SAN_CONFIG_FILE"] = "none";
  EXPECT_EQ(ConfigFilePath(FakeGetenv), "");
  env["SAN_CONFIG_FILE"] = "/srv/sanlib.conf";
  EXPECT_EQ(ConfigFilePath(FakeGetenv), "/srv/sanlib.conf");
}

TEST(ConfigFileTest, AMissingFileIsNoErrorAndAPresentOneIsRead) {
  std::vector<std::string> errors;
  EXPECT_EQ(ReadConfigFile("/nonexistent/sanlib.conf", &errors).path, "");
  EXPECT_TRUE(errors.empty());
  char path[] = "/tmp/sanlib_conf_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "SAN_SPIN_US = 0\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  const ConfigFile f = ReadConfigFile(path, &errors);
  std::remove(path);
  EXPECT_TRUE(errors.empty());
  EXPECT_EQ(f.path, path);
  ASSERT_EQ(f.settings.size(), 1u);
  EXPECT_EQ(f.settings[0].value, "0");
}

}  // namespace
}  // namespace san
