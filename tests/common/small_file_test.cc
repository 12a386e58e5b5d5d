#include "sanlib/common/small_file.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "support/temp_file.h"

namespace san {
namespace {

using testing_support::TempFile;

// A scratch file holding `text` (tests/support/temp_file.h).
std::vector<char> Bytes(const std::string& text) { return {text.begin(), text.end()}; }

TEST(SmallFile, ReadsTheWholeFileAcrossSeveralReads) {
  std::string text;
  for (int i = 0; i < 3000; ++i) text += std::to_string(i) + (i % 10 == 9 ? "\n" : " ");
  ASSERT_GT(text.size(), 4096u * 2);  // more than one read's buffer
  TempFile file(Bytes(text));
  std::string got = "stale";
  ASSERT_TRUE(ReadSmallFile(file.path(), &got));
  EXPECT_EQ(got, text);
}

TEST(SmallFile, AMissingFileIsFalseWithENOENT) {
  std::string got = "stale";
  errno = 0;
  EXPECT_FALSE(ReadSmallFile("/nonexistent/san_small_file", &got));
  EXPECT_EQ(errno, ENOENT);
  EXPECT_TRUE(got.empty());
}

TEST(SmallFile, AFileBeyondTheBoundIsFalseWithEFBIG) {
  TempFile file(Bytes(std::string(100, 'x')));
  std::string got;
  errno = 0;
  EXPECT_FALSE(ReadSmallFile(file.path(), &got, 99));
  EXPECT_EQ(errno, EFBIG);
  EXPECT_TRUE(ReadSmallFile(file.path(), &got, 100));
  EXPECT_EQ(got.size(), 100u);
}

TEST(SmallFile, ADirectoryIsFalseWithTheReadsError) {
  std::string got;
  errno = 0;
  EXPECT_FALSE(ReadSmallFile("/tmp", &got));
  EXPECT_EQ(errno, EISDIR);
}

TEST(SmallFile, FirstLineOfProcfsAndOfAFileWithoutNewline) {
  const std::string comm = FirstLineOf("/proc/self/comm");
  EXPECT_FALSE(comm.empty());
  EXPECT_EQ(comm.find('\n'), std::string::npos);
  TempFile file(Bytes("no newline"));
  EXPECT_EQ(FirstLineOf(file.path()), "no newline");
  EXPECT_EQ(FirstLineOf("/nonexistent/san_small_file"), "");
}

}  // namespace
}  // namespace san
