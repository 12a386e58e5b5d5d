// Stream::SendFile (san_sendfile's engine): the file's bytes arrive exactly, after any combined
// bytes sent before them, a packet at a time as the window allows; end of file and file errors
// are the file's outcome, never the connection's. Runs over the loopback provider twice: with
// kCapSendFromFile masked off (the staging-slot path verbs takes) and over real shm (the
// provider reads straight into the peer's buffers).
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stream_test_util.h"
#include "support/temp_file.h"

namespace san::proto {
namespace {

using san::testing_support::TempFile;

using testing::MakePair;
using testing::Pattern;
using testing::PumpUntil;
using testing::StreamPair;
using testing::WindowsOpen;

enum class Path { kStaging, kProvider };

class StreamFile : public ::testing::TestWithParam<Path> {
 protected:
  void SetUp() override {
    testing::PairOptions opt;
    fabric::Provider* provider = GetParam() == Path::kProvider ? fabric::GetProvider("shm")
                                                               : fabric::loopback::SharedProvider();
    ASSERT_NE(provider, nullptr);
    opt.caps = provider->capabilities();
    if (GetParam() == Path::kStaging) opt.caps &= ~uint32_t{fabric::kCapSendFromFile};
    ASSERT_EQ(GetParam() == Path::kProvider, (opt.caps & fabric::kCapSendFromFile) != 0);
    ASSERT_NO_FATAL_FAILURE(MakePair(provider, opt, &pair_));
    ASSERT_TRUE(WindowsOpen(pair_));
  }

  // Sends [offset, offset+count) of `fd` with SendFile while reading on the other side; returns
  // what arrived (and SendFile's total in *sent). Single thread, bounded.
  std::vector<uint8_t> Move(int fd, off_t offset, size_t count, size_t* sent, int* file_error) {
    std::vector<uint8_t> got;
    std::vector<uint8_t> buf(65536);
    *sent = 0;
    *file_error = 0;
    bool done = false;
    int idle = 0;  // rounds since the last byte arrived, once the sending is done
    for (int round = 0; round < 200000 && idle < 2000; ++round) {
      if (!done) {
        Result<size_t> r = pair_.client->SendFile(fd, offset + static_cast<off_t>(*sent),
                                                  count - *sent, true, file_error);
        if (r.ok()) {
          *sent += r.value();
          done = *sent == count || r.value() == 0 || *file_error != 0;
        } else {
          EXPECT_TRUE(r.status().would_block()) << r.status().ToString();
          if (!r.status().would_block()) break;
        }
      }
      Result<size_t> r = testing::RecvBytes(*pair_.server, buf.data(), buf.size());
      if (r.ok() && r.value() > 0) {
        got.insert(got.end(), buf.begin(), buf.begin() + r.value());
        idle = 0;
      } else if (done) {
        ++idle;
      }
      pair_.client->Progress();
    }
    return got;
  }
  StreamPair pair_;
};

TEST_P(StreamFile, AFileArrivesExactlyAfterTheCombinedBytesBeforeIt) {
  const std::vector<uint8_t> data = Pattern(3u << 20, 9);
  TempFile file(data);
  ASSERT_EQ(testing::SendBytes(*pair_.client, "hdr:", 4).value(), 4u);  // combined, not posted yet
  size_t sent = 0;
  int file_error = 0;
  std::vector<uint8_t> got = Move(file.fd(), 12345, data.size() - 12345 - 100, &sent, &file_error);
  EXPECT_EQ(file_error, 0);
  EXPECT_EQ(sent, data.size() - 12345 - 100);
  std::vector<uint8_t> want = {'h', 'd', 'r', ':'};
  want.insert(want.end(), data.begin() + 12345, data.end() - 100);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want);
  EXPECT_EQ(pair_.client->Stats().bytes_sent, want.size());
}

TEST_P(StreamFile, EndOfFileStopsShortAndThenGivesZero) {
  const std::vector<uint8_t> data = Pattern(100000, 2);
  TempFile file(data);
  size_t sent = 0;
  int file_error = 0;
  std::vector<uint8_t> got = Move(file.fd(), 90000, 50000, &sent, &file_error);
  EXPECT_EQ(sent, 10000u);
  EXPECT_EQ(file_error, 0);
  EXPECT_TRUE(got == std::vector<uint8_t>(data.begin() + 90000, data.end()));
  Result<size_t> r = pair_.client->SendFile(file.fd(), 100000, 10, true, &file_error);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), 0u);
  EXPECT_EQ(file_error, 0);
}

TEST_P(StreamFile, AFileErrorIsTheFilesAndTheConnectionGoesOn) {
  TempFile file(Pattern(1000, 1));
  const int wronly = open(file.path().c_str(), O_WRONLY);
  ASSERT_GE(wronly, 0);
  int file_error = 0;
  Result<size_t> r = pair_.client->SendFile(wronly, 0, 1000, true, &file_error);
  close(wronly);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), 0u);
  EXPECT_EQ(file_error, EBADF);
  EXPECT_EQ(pair_.client->GetReadiness().error, 0);
  // The window is intact: the next bytes go as usual.
  size_t sent = 0;
  std::vector<uint8_t> got = Move(file.fd(), 0, 1000, &sent, &file_error);
  EXPECT_EQ(sent, 1000u);
  EXPECT_TRUE(got == Pattern(1000, 1));
}

TEST_P(StreamFile, AClosedWindowIsEagainAndAfterShutdownEpipe) {
  const std::vector<uint8_t> data = Pattern(8u << 20, 4);
  TempFile file(data);
  int file_error = 0;
  size_t sent = 0;
  for (int i = 0; i < 100; ++i) {  // nobody reads: the window closes
    Result<size_t> r = pair_.client->SendFile(file.fd(), static_cast<off_t>(sent),
                                              data.size() - sent, true, &file_error);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), EAGAIN);
      break;
    }
    sent += r.value();
  }
  EXPECT_GT(sent, 0u);
  EXPECT_LT(sent, data.size());
  EXPECT_EQ(pair_.client->Stats().credits, 0u);
  ASSERT_TRUE(pair_.client->ShutdownWrite().ok() || pair_.client->ShutdownWrite().would_block());
  Result<size_t> r = pair_.client->SendFile(file.fd(), 0, 10, true, &file_error);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), EPIPE);
}

INSTANTIATE_TEST_SUITE_P(Paths, StreamFile, ::testing::Values(Path::kStaging, Path::kProvider),
                         [](const ::testing::TestParamInfo<Path>& i) {
                           return std::string(i.param == Path::kStaging ? "Staging" : "Provider");
                         });

}  // namespace
}  // namespace san::proto
