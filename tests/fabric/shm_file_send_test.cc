// The shm provider's sends from a file (kCapSendFromFile): the file's bytes land in the peer's
// receive exactly as a PostSend of the same bytes would put them; a file that gives nothing (end
// of file, a read error) posts nothing and leaves the connection and the peer's receive as they
// were, so the next send still lands there.
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fabric_test_util.h"
#include "sanlib/fabric/registry.h"
#include "support/temp_file.h"

namespace san::fabric {
namespace {

using san::testing_support::TempFile;

using testing::ConnectPair;
using testing::OneSegment;
using testing::Pair;
using testing::PairOptions;
using testing::WaitCompletions;

std::vector<char> Bytes(size_t n, unsigned seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7) >> 1);
  return v;
}

PairOptions FourReceives() {
  PairOptions opt;
  opt.recv_size = 4096;
  opt.server_recvs = 4;
  return opt;
}

// The server's completion for one message: its length, immediate and bytes.
struct Landed {
  uint32_t length = 0;
  uint32_t imm = 0;
  std::vector<char> bytes;
};

Landed NextMessage(Pair& pair) {
  Landed out;
  std::vector<Completion> c = WaitCompletions(pair.server.get(), 1);
  EXPECT_EQ(c.size(), 1u);
  if (c.size() != 1) return out;
  EXPECT_EQ(c[0].error, 0);
  out.length = c[0].length;
  out.imm = c[0].imm;
  const size_t slot = c[0].id - 2000;
  const char* at = reinterpret_cast<const char*>(pair.server_buf.addr) + slot * pair.recv_size;
  out.bytes.assign(at, at + c[0].length);
  return out;
}

TEST(fabric_shm_file_send, ProviderAdvertisesIt) {
  EXPECT_NE(GetProvider("shm")->capabilities() & kCapSendFromFile, 0u);
}

TEST(fabric_shm_file_send, FileBytesFollowTheSegmentsAndShortReadsPostWhatWasRead) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(GetProvider("shm"), FourReceives(), &pair));
  const std::vector<char> data = Bytes(5000, 3);
  TempFile file(data);
  const char header[] = "HDR";
  SendWork work = OneSegment(7, 0xabc, header, 3);
  FileRead read;
  ASSERT_TRUE(
      pair.client->PostSendFromFile(work, FileSlice{file.fd(), 100, 2000, true}, &read).ok());
  EXPECT_EQ(read.bytes, 2000u);
  Landed m = NextMessage(pair);
  EXPECT_EQ(m.length, 2003u);
  EXPECT_EQ(m.imm, 0xabcu);
  std::vector<char> want(header, header + 3);
  want.insert(want.end(), data.begin() + 100, data.begin() + 2100);
  EXPECT_EQ(m.bytes, want);
  // Near the end of the file: only what is there is posted.
  SendWork bare;
  bare.id = 8;
  ASSERT_TRUE(
      pair.client->PostSendFromFile(bare, FileSlice{file.fd(), 4000, 4096, false}, &read).ok());
  EXPECT_EQ(read.bytes, 1000u);
  m = NextMessage(pair);
  EXPECT_EQ(m.bytes, std::vector<char>(data.begin() + 4000, data.end()));
  // Both sends completed, in order.
  std::vector<Completion> sends = WaitCompletions(pair.client.get(), 2);
  ASSERT_EQ(sends.size(), 2u);
  EXPECT_EQ(sends[0].id, 7u);
  EXPECT_EQ(sends[1].id, 8u);
}

// A pair with four receives at the server and a ten-byte file.
class FileSend : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ConnectPair(GetProvider("shm"), FourReceives(), &pair_));
  }
  // A send of `slice` that must post nothing and report `error`.
  void ExpectNothing(const FileSlice& slice, int error) {
    SendWork work;
    work.id = 1;
    FileRead read;
    ASSERT_TRUE(pair_.client->PostSendFromFile(work, slice, &read).ok());
    EXPECT_EQ(read.bytes, 0u);
    EXPECT_EQ(read.error, error);
  }
  Pair pair_;
  TempFile file_{Bytes(10, 1)};
};

TEST_F(FileSend, AFileThatGivesNothingPostsNothingAndTheReceiveStaysForTheNextSend) {
  Pair& pair = pair_;
  ExpectNothing(FileSlice{file_.fd(), 10, 100, true}, 0);   // end of file
  const int wronly = open(file_.path().c_str(), O_WRONLY);  // a read error
  ASSERT_GE(wronly, 0);
  ExpectNothing(FileSlice{wronly, 0, 100, true}, EBADF);
  close(wronly);
  const int dir = open("/", O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  ExpectNothing(FileSlice{dir, 0, 100, false}, EISDIR);
  close(dir);
  // Nothing arrived, nothing completed, and the connection carries the next message into the
  // first receive.
  EXPECT_TRUE(WaitCompletions(pair.server.get(), 1, 50).empty());
  EXPECT_TRUE(WaitCompletions(pair.client.get(), 1, 50).empty());
  EXPECT_FALSE(pair.client->broken());
  ASSERT_TRUE(pair.client->PostSend(OneSegment(2, 5, "ok", 2)).ok());
  std::vector<Completion> c = WaitCompletions(pair.server.get(), 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].id, 2000u);
  EXPECT_EQ(c[0].length, 2u);
}

TEST(fabric_shm_file_send, LargerThanTheMtuIsRefusedLikePostSend) {
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(GetProvider("shm"), FourReceives(), &pair));
  TempFile file(Bytes(10, 1));
  SendWork work;
  FileRead read;
  const uint32_t too_big = pair.client->mtu() + 1;
  EXPECT_EQ(
      pair.client->PostSendFromFile(work, FileSlice{file.fd(), 0, too_big, true}, &read).code(),
      EMSGSIZE);
  EXPECT_FALSE(pair.client->broken());
}

}  // namespace
}  // namespace san::fabric
