// FileSource (ftpd/net/file_source.h): the bytes of a file from its offset to its end, from a
// leased read-only mapping when it can, else read(). Checked: every byte arrives in order on both
// paths; a writer or a truncation that comes while the mapping is in use waits for the lease,
// which we give up at the next Pin/Next after copying what was still to send (no SIGBUS, no
// byte of the new contents mixed into a chunk that was handed out before).
#include "net/file_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "ftp_test_util.h"

namespace san::ftp::testing {
namespace {

constexpr size_t kChunk = 256 * 1024;

// All that `source` yields, each chunk taken through Pin as a sender would.
std::string Drain(FileSource& source) {
  std::string out;
  while (true) {
    Result<FileSource::Chunk> c = source.Next();
    EXPECT_TRUE(c.ok());
    if (!c.ok() || c->size == 0) return out;
    const char* p = source.Pin(c->data, c->size);
    out.append(p, c->size);
  }
}

class FtpFileSource : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_ / "file";
    content_ = RandomBytes(5 << 20, 17);
    WriteFile(path_, content_);
    fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
  }
  TempDir dir_;
  std::string path_;
  std::string content_;
  int fd_ = -1;
};

TEST_F(FtpFileSource, MappedYieldsEveryByteFromTheOffset) {
  ASSERT_EQ(lseek(fd_, 12345, SEEK_SET), 12345);
  FileSource source(fd_, true, kChunk);
  // We own the file, so the kernel grants the read lease (unless leases are off on this host).
  if (!source.mapped()) GTEST_SKIP() << "no file lease here (fs.leases-enable?)";
  EXPECT_EQ(Drain(source), content_.substr(12345));
}

TEST_F(FtpFileSource, ReadPathWhenNotAllowedOrSmall) {
  FileSource plain(fd_, false, kChunk);
  EXPECT_FALSE(plain.mapped());
  EXPECT_EQ(Drain(plain), content_);
  const std::string small_path = dir_ / "small";
  WriteFile(small_path, content_.substr(0, 1000));
  const int small = open(small_path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(small, 0);
  {
    FileSource s(small, true, kChunk);
    EXPECT_FALSE(s.mapped());  // not worth a mapping
    EXPECT_EQ(Drain(s), content_.substr(0, 1000));
  }
  // The lease went with the FileSource: the file can be opened for writing at once.
  const int w = open(small_path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  EXPECT_GE(w, 0);
  if (w >= 0) close(w);
  close(small);
}

// A writer arrives mid-file: its open waits (here: fails with EWOULDBLOCK, being nonblocking)
// and starts the lease break; Pin moves the rest of the chunk to a private copy, the lease is
// released, and the rest of the file comes by read().
TEST_F(FtpFileSource, AWriterBreaksTheLeaseAndTheRestIsRead) {
  FileSource source(fd_, true, kChunk);
  if (!source.mapped()) GTEST_SKIP() << "no file lease here";
  std::string got;
  Result<FileSource::Chunk> first = source.Next();
  ASSERT_TRUE(first.ok());
  got.append(source.Pin(first->data, 100), 100);
  errno = 0;
  EXPECT_EQ(open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC), -1);
  EXPECT_EQ(errno, EWOULDBLOCK);
  const char* rest = source.Pin(first->data + 100, first->size - 100);
  EXPECT_NE(rest, first->data + 100);  // a private copy now
  EXPECT_FALSE(source.mapped());
  got.append(rest, first->size - 100);
  got += Drain(source);
  EXPECT_EQ(got, content_);
  const int w = open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  EXPECT_GE(w, 0);
  if (w >= 0) close(w);
}

// truncate(2) from elsewhere while the mapping is in use: it waits for the lease (a mapping
// past the new end would be SIGBUS), we let go at the next Pin with the chunk's bytes intact,
// and then the truncation happens.
TEST_F(FtpFileSource, TruncationWaitsUntilTheMappingIsGivenUp) {
  FileSource source(fd_, true, kChunk);
  if (!source.mapped()) GTEST_SKIP() << "no file lease here";
  Result<FileSource::Chunk> first = source.Next();
  ASSERT_TRUE(first.ok());
  std::atomic<bool> truncated{false};
  std::thread cutter([&] {
    EXPECT_EQ(truncate(path_.c_str(), 0), 0);
    truncated = true;
  });
  // Wait (bounded) until the kernel is breaking our lease: the truncation is blocked on it.
  for (int i = 0; i < 5000 && fcntl(fd_, F_GETLEASE) == F_RDLCK; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(truncated.load());
  const char* p = source.Pin(first->data, first->size);
  EXPECT_EQ(std::string(p, first->size), content_.substr(0, first->size));
  cutter.join();
  EXPECT_TRUE(truncated.load());
  // The file is empty now: nothing more, and no fault.
  EXPECT_EQ(Drain(source), "");
}

}  // namespace
}  // namespace san::ftp::testing
