// Jail (files/jail.h): no path, "..", absolute or relative symlink, or symlinked parent lets a
// session read, create, rename, delete or chmod anything outside its root. The layout:
//   <tmp>/outside/secret                    a file the session must never reach
//   <tmp>/root/                              the session root
//   root/file, root/dir/inner
//   root/abs_link -> <tmp>/outside/secret   (absolute, real path)
//   root/abs_dir  -> <tmp>/outside          (absolute directory)
//   root/up_link  -> ../outside/secret      (relative, climbs out)
//   root/dir/deep -> ../../../../../../outside
//   root/etc_link -> /etc/passwd            (in the jail: <root>/etc/passwd, which does not exist)
//   root/ok_link  -> dir/inner              (stays inside: must work)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "files/jail.h"
#include "ftp_test_util.h"
#include "ftpd/fs/listing.h"

namespace san::ftp {
namespace {

using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

class FtpJail : public ::testing::Test {
 protected:
  void SetUp() override {
    outside_ = tmp_ / "outside";
    root_ = tmp_ / "root";
    mkdir(outside_.c_str(), 0755);
    mkdir(root_.c_str(), 0755);
    mkdir((root_ + "/dir").c_str(), 0755);
    WriteFile(outside_ + "/secret", "SECRET");
    WriteFile(root_ + "/file", "file");
    WriteFile(root_ + "/dir/inner", "inner");
    ASSERT_EQ(symlink((outside_ + "/secret").c_str(), (root_ + "/abs_link").c_str()), 0);
    ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/abs_dir").c_str()), 0);
    ASSERT_EQ(symlink("../outside/secret", (root_ + "/up_link").c_str()), 0);
    ASSERT_EQ(symlink("../../../../../../outside", (root_ + "/dir/deep").c_str()), 0);
    ASSERT_EQ(symlink("/etc/passwd", (root_ + "/etc_link").c_str()), 0);
    ASSERT_EQ(symlink("dir/inner", (root_ + "/ok_link").c_str()), 0);
    Result<files::Jail> j = files::Jail::Open(root_);
    ASSERT_TRUE(j.ok());
    jail_.emplace(std::move(j.value()));
  }

  std::string Read(const std::string& vpath) {
    Result<UniqueFd> fd = jail_->OpenFile(vpath, O_RDONLY);
    if (!fd.ok()) {  // append, not "<" + ...: GCC 12 -Wrestrict false positive in release
      std::string out(1, '<');
      return out.append(std::to_string(fd.status().code())).append(">");
    }
    char buf[64] = {};
    const ssize_t n = read(fd->get(), buf, sizeof buf - 1);
    return std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
  }

  TempDir tmp_;
  std::string outside_, root_;
  std::optional<files::Jail> jail_;
};

TEST_F(FtpJail, InsidePathsWork) {
  EXPECT_EQ(Read("/file"), "file");
  EXPECT_EQ(Read("/dir/inner"), "inner");
  EXPECT_EQ(Read("/ok_link"), "inner");
  EXPECT_TRUE(jail_->Stat("/dir").ok());
}

TEST_F(FtpJail, SymlinksCannotReadOutside) {
  for (const char* p : {"/abs_link", "/abs_dir/secret", "/up_link", "/dir/deep/secret", "/etc_link",
                        "/../outside/secret", "/dir/../../outside/secret"}) {
    const std::string got = Read(p);
    EXPECT_NE(got, "SECRET") << p;
    EXPECT_EQ(got[0], '<') << p << " opened: " << got;
  }
  EXPECT_FALSE(jail_->Stat("/abs_dir").ok() && S_ISDIR(jail_->Stat("/abs_dir")->st_mode) &&
               jail_->OpenFile("/abs_dir/secret", O_RDONLY).ok());
}

TEST_F(FtpJail, CannotCreateOrChangeOutside) {
  EXPECT_FALSE(jail_->MakeDir("/abs_dir/newdir", 0755).ok());
  EXPECT_FALSE(Exists(outside_ + "/newdir"));
  EXPECT_FALSE(jail_->OpenFile("/dir/deep/created", O_WRONLY | O_CREAT, 0644).ok());
  EXPECT_FALSE(Exists(outside_ + "/created"));
  EXPECT_FALSE(jail_->Rename("/file", "/abs_dir/moved").ok());
  EXPECT_FALSE(Exists(outside_ + "/moved"));
  EXPECT_TRUE(Exists(root_ + "/file"));
  EXPECT_FALSE(jail_->Unlink("/abs_dir/secret").ok());
  EXPECT_FALSE(jail_->Chmod("/abs_link", 0777).ok());
  struct stat st {};
  ASSERT_EQ(stat((outside_ + "/secret").c_str(), &st), 0);
  EXPECT_NE(st.st_mode & 0777, 0777u);
  EXPECT_EQ(ReadFile(outside_ + "/secret"), "SECRET");
}

TEST_F(FtpJail, UnlinkRemovesTheLinkNotItsTarget) {
  ASSERT_TRUE(jail_->Unlink("/abs_link").ok());
  EXPECT_FALSE(Exists(root_ + "/abs_link"));
  EXPECT_EQ(ReadFile(outside_ + "/secret"), "SECRET");
  EXPECT_EQ(jail_->Unlink("/dir").code(), EISDIR);
}

TEST_F(FtpJail, RootItselfIsNotANameToChange) {
  std::string name;
  EXPECT_FALSE(jail_->OpenParent("/", &name).ok());
  EXPECT_FALSE(jail_->RemoveDir("/").ok());
  EXPECT_TRUE(Exists(root_));
}

TEST_F(FtpJail, ListingShowsLinksWithoutFollowingThem) {
  Result<std::vector<DirEntry>> entries = ReadDirectory(*jail_, "/", false);
  ASSERT_TRUE(entries.ok());
  bool saw_abs = false;
  for (const DirEntry& e : *entries) {
    if (e.name == "abs_link") {
      saw_abs = true;
      EXPECT_TRUE(S_ISLNK(e.st.st_mode));
    }
  }
  EXPECT_TRUE(saw_abs);
  EXPECT_FALSE(ReadDirectory(*jail_, "/abs_dir", false).ok());
}

}  // namespace
}  // namespace san::ftp
