// Node.Transfer's data connection against a real drpcd, driven at the protocol level from here
// (gRPC stub over kernel TCP, raw data connections): what a hostile or broken client does to it.
// A wrong ticket, too many of them, fewer or more bytes than announced, no data connection at
// all, the node killed mid-pull: each ends the call with a clear status, never hangs, and leaves
// no file (or temporary) in the node's root. The happy paths over SAN and TCP are in e2e_test.cc.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dirent.h>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "drpc/client/commands.h"
#include "drpc/node/data_transfer.h"
#include "drpc/transport/channel.h"
#include "drpc/transport/data_stream.h"
#include "process.h"
#include "san/san.h"

namespace san::drpc::testing {
namespace {

const char kToken[] = "data-token-0123456789abcdef";
using Clock = std::chrono::steady_clock;

class DrpcDataConnection : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(dir_.Join("token"), std::string(kToken) + "\n", 0600);
    root_ = dir_.Join("root");
    ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
    ASSERT_TRUE(node_.Start(dir_.path(), "127.0.0.1",
                            {"--token-file", dir_.Join("token"), "--root", root_}))
        << node_.log();
    target_.spec = target_.host = "127.0.0.1";
    target_.port = static_cast<uint16_t>(node_.port());
    std::string error;
    channel_ = MakeChannel(target_, 3000, &error);
    ASSERT_NE(channel_, nullptr) << error;
    stub_ = Node::NewStub(channel_);
    settings_.token = kToken;
  }

  // Starts a Transfer and reads its offer.
  void Begin(const TransferRequest& request, uint32_t timeout_ms = 20000) {
    ctx_ = MakeContext(settings_, timeout_ms);
    reader_ = stub_->Transfer(ctx_.get(), request);
    TransferEvent event;
    ASSERT_TRUE(reader_->Read(&event));
    ASSERT_TRUE(event.has_offer());
    offer_ = event.offer();
    ASSERT_EQ(offer_.ticket().size(), kTicketBytes);
  }

  TransferRequest PushRequest(const std::string& path, uint64_t size) {
    TransferRequest r;
    r.mutable_header()->set_path(path);
    r.mutable_header()->set_size(size);
    return r;
  }

  // A kernel TCP connection to the offered port that sends `first` (nonblocking).
  int Connect(const std::string& first) {
    Target t = target_;
    t.port = static_cast<uint16_t>(offer_.port());
    std::string error;
    const int fd = ConnectTarget(t, 3000, &error);
    EXPECT_GE(fd, 0) << error;
    if (fd >= 0 && !first.empty()) {
      EXPECT_TRUE(SendAllOn(fd, first.data(), first.size(), {}).ok());
    }
    return fd;
  }

  // Whether the node closes fd within 10 s (reads and discards anything before).
  static bool ClosedByPeer(int fd) {
    DataWait wait;
    wait.deadline = Clock::now() + std::chrono::seconds(10);
    char b[64];
    for (;;) {
      Status s = ReceiveExactOn(fd, b, sizeof b, wait);
      if (!s.ok()) return s.code() != ETIMEDOUT;
    }
  }

  // The call's end: the events after the offer, then the status.
  grpc::Status Finish(TransferEvent* last = nullptr) {
    TransferEvent event;
    while (reader_->Read(&event)) {
      if (last) *last = event;
    }
    return reader_->Finish();
  }

  // The names in the root (temporaries included), waiting up to 5 s for the node to tidy up.
  std::vector<std::string> RootEntries(size_t expect) {
    std::vector<std::string> names;
    for (int i = 0; i < 50; ++i) {
      names.clear();
      DIR* d = opendir(root_.c_str());
      while (dirent* e = d ? readdir(d) : nullptr) {
        const std::string n = e->d_name;
        if (n != "." && n != "..") names.push_back(n);
      }
      if (d) closedir(d);
      if (names.size() == expect) break;
      usleep(100 * 1000);
    }
    return names;
  }

  TempDir dir_;
  std::string root_;
  Daemon node_;
  Target target_;
  CallSettings settings_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Node::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReader<TransferEvent>> reader_;
  DataOffer offer_;
};

TEST_F(DrpcDataConnection, WrongTicketIsDroppedAndTheRightOneStillServes) {
  const std::string data = "the bytes of the file\n";
  ASSERT_NO_FATAL_FAILURE(Begin(PushRequest("f", data.size())));
  std::string wrong = offer_.ticket();
  wrong[0] = static_cast<char>(wrong[0] ^ 1);
  const int intruder = Connect(wrong + "injected");
  EXPECT_TRUE(ClosedByPeer(intruder));
  san_close(intruder);
  const int fd = Connect(offer_.ticket() + data);
  ASSERT_GE(fd, 0);
  san_shutdown(fd, SHUT_WR);
  TransferEvent last;
  const grpc::Status s = Finish(&last);
  san_close(fd);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(last.has_done());
  EXPECT_EQ(last.done().bytes(), data.size());
  EXPECT_EQ(ReadFile(root_ + "/f"), data);
}

TEST_F(DrpcDataConnection, TooManyWrongTicketsEndTheCall) {
  ASSERT_NO_FATAL_FAILURE(Begin(PushRequest("f", 10)));
  for (int i = 0; i < kMaxWrongConnections; ++i) {
    const int fd = Connect(std::string(kTicketBytes, 'x'));
    ASSERT_GE(fd, 0);
    EXPECT_TRUE(ClosedByPeer(fd));
    san_close(fd);
  }
  const grpc::Status s = Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_TRUE(RootEntries(0).empty());
}

TEST_F(DrpcDataConnection, FewerBytesThanAnnouncedIsDataLossAndLeavesNothing) {
  ASSERT_NO_FATAL_FAILURE(Begin(PushRequest("f", 1000)));
  const int fd = Connect(offer_.ticket() + std::string(500, 'a'));
  ASSERT_GE(fd, 0);
  san_close(fd);
  const grpc::Status s = Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DATA_LOSS) << s.error_message();
  EXPECT_NE(s.error_message().find("500 of 1000"), std::string::npos) << s.error_message();
  EXPECT_TRUE(RootEntries(0).empty());
}

TEST_F(DrpcDataConnection, MoreBytesThanAnnouncedIsRefusedAndLeavesNothing) {
  ASSERT_NO_FATAL_FAILURE(Begin(PushRequest("f", 100)));
  const int fd = Connect(offer_.ticket() + std::string(200, 'a'));
  ASSERT_GE(fd, 0);
  san_shutdown(fd, SHUT_WR);
  const grpc::Status s = Finish();
  san_close(fd);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_TRUE(RootEntries(0).empty());
}

TEST_F(DrpcDataConnection, NoDataConnectionEndsWithTheCallsDeadline) {
  const Clock::time_point t0 = Clock::now();
  ASSERT_NO_FATAL_FAILURE(Begin(PushRequest("f", 10), 1500));
  const grpc::Status s = Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_TRUE(RootEntries(0).empty());
  // The node is free for the next call: its handler gave up too.
  TransferRequest pull;
  pull.set_pull(true);
  pull.mutable_header()->set_path("nothing-here");
  ctx_ = MakeContext(settings_, 5000);
  reader_ = stub_->Transfer(ctx_.get(), pull);
  EXPECT_EQ(Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(DrpcDataConnection, NodeKilledMidPullEndsTheDataConnection) {
  // A sparse 16 GiB file: the node could not finish sending it for a long while.
  const std::string big = root_ + "/big";
  const int file = open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(file, 0);
  ASSERT_EQ(ftruncate(file, 16ll << 30), 0);
  close(file);
  TransferRequest pull;
  pull.set_pull(true);
  pull.mutable_header()->set_path("big");
  ASSERT_NO_FATAL_FAILURE(Begin(pull));
  EXPECT_EQ(offer_.size(), 16ull << 30);
  const int fd = Connect(offer_.ticket());
  ASSERT_GE(fd, 0);
  char some[4096];
  DataWait wait;
  wait.deadline = Clock::now() + std::chrono::seconds(10);
  ASSERT_TRUE(ReceiveExactOn(fd, some, sizeof some, wait).ok());
  node_.Kill();
  const int null = open("/dev/null", O_WRONLY);
  const Clock::time_point t0 = Clock::now();
  Result<uint64_t> got = ReceiveFileOn(fd, null, offer_.size(), wait);
  close(null);
  san_close(fd);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  if (got.ok()) {
    EXPECT_LT(*got, offer_.size());  // EOF early, or an error (reset)
  }
  EXPECT_FALSE(Finish().ok());
}

}  // namespace
}  // namespace san::drpc::testing
