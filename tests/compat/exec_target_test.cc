// compat/exec_target.h: which new images load the layer (and so may take SAN connections over
// exec). Real files of this system: a dynamic shell, the static ldconfig, scripts written here.
#include "compat/exec_target.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace san::compat {
namespace {

std::string Script(const std::string& name, const std::string& first_line) {
  const std::string path = "/tmp/san_exec_target_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path) << first_line << "\necho hi\n";
  chmod(path.c_str(), 0755);
  return path;
}

TEST(ExecTargetTest, PreloadMustNameTheLayer) {
  char preload[] = "LD_PRELOAD=/opt/x/lib/libsan_preload.so";
  char listed[] = "LD_PRELOAD=libother.so:/opt/x/lib/libsan_preload.so libmore.so";
  char other[] = "LD_PRELOAD=/usr/lib/libother.so";
  char empty[] = "LD_PRELOAD=";
  char path[] = "PATH=/bin";
  char* with[] = {path, preload, nullptr};
  char* in_list[] = {listed, nullptr};
  char* without[] = {path, other, nullptr};
  char* dropped[] = {empty, nullptr};
  char* none[] = {nullptr};
  EXPECT_TRUE(NewImageRunsLayer("/bin/sh", with));
  EXPECT_TRUE(NewImageRunsLayer("/bin/sh", in_list));
  EXPECT_FALSE(NewImageRunsLayer("/bin/sh", without));
  EXPECT_FALSE(NewImageRunsLayer("/bin/sh", dropped));
  EXPECT_FALSE(NewImageRunsLayer("/bin/sh", none));
  EXPECT_FALSE(NewImageRunsLayer("/bin/sh", nullptr));
}

TEST(ExecTargetTest, StaticProgramsAndTheirScriptsDoNotLoadIt) {
  char preload[] = "LD_PRELOAD=/opt/x/lib/libsan_preload.so";
  char* env[] = {preload, nullptr};
  if (access("/sbin/ldconfig", R_OK) != 0) GTEST_SKIP() << "no /sbin/ldconfig";
  EXPECT_FALSE(NewImageRunsLayer("/sbin/ldconfig", env));  // statically linked on Debian
  const std::string on_static = Script("static", "#!/sbin/ldconfig -p");
  const std::string on_shell = Script("shell", "#! /bin/sh");
  const std::string unknown = Script("plain", "echo no interpreter line");
  EXPECT_FALSE(NewImageRunsLayer(on_static.c_str(), env));
  EXPECT_TRUE(NewImageRunsLayer(on_shell.c_str(), env));
  EXPECT_TRUE(NewImageRunsLayer(unknown.c_str(), env));      // execvp runs it with /bin/sh
  EXPECT_TRUE(NewImageRunsLayer("/nonexistent/prog", env));  // the exec fails; all is put back
  for (const std::string& p : {on_static, on_shell, unknown}) unlink(p.c_str());
}

TEST(ExecTargetTest, ResolveOnPathAsExecvp) {
  const char* old = getenv("PATH");
  const std::string saved = old ? old : "";
  setenv("PATH", "/nonexistent:/bin:/usr/bin", 1);
  const std::string sh = ResolveOnPath("sh");
  EXPECT_TRUE(sh == "/bin/sh" || sh == "/usr/bin/sh") << sh;
  EXPECT_EQ(ResolveOnPath("./relative/prog"), "./relative/prog");
  EXPECT_EQ(ResolveOnPath("no-such-program-here"), "no-such-program-here");
  if (old) setenv("PATH", saved.c_str(), 1);
}

}  // namespace
}  // namespace san::compat
