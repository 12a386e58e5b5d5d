// ftpd's transfers over an accelerated (shm) data connection, driven by hand: the control
// connection is a raw kernel TCP client (RawClient), the data connection a SAN socket of this
// test process, so ftpd's side of it is on shm and its one-copy file paths (san_recvfile into the
// file, the mapped or san_sendfile sends) are the ones exercised -- with REST, APPE, STOU, TYPE A,
// ABOR in both directions and data timeouts, which ftp_client never sends by itself.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "ftp_test_util.h"
#include "protocol/address.h"
#include "san/san.h"

namespace san::ftp::testing {
namespace {

// A SAN data connection to the server's PASV port.
class SanData {
 public:
  explicit SanData(RawClient& c) {
    if (!c.Send("PASV\r\n")) return;
    const std::string text = c.Reply();
    if (c.code() != 227) return;
    std::optional<HostPort> hp = ParsePasvReply(text);
    if (!hp) return;
    fd_ = san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0);
    if (fd_ >= 0 && san_connect(fd_, reinterpret_cast<const sockaddr*>(&hp->addr), hp->len) != 0) {
      Close();
    }
  }
  ~SanData() { Close(); }
  bool ok() const { return fd_ >= 0; }
  bool Shm() const {
    san_info info{};
    return fd_ >= 0 && san_getinfo(fd_, &info) == 0 && info.mode == SAN_MODE_SHM;
  }
  bool SendAll(const std::string& bytes) const {
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = san_send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // Up to `max` bytes (or to EOF), each wait bounded by 10 s.
  std::string Read(size_t max = SIZE_MAX) const {
    std::string out;
    char buf[65536];
    while (out.size() < max) {
      pollfd p{fd_, POLLIN, 0};
      if (san_poll(&p, 1, 10000) <= 0) break;
      const ssize_t n = san_recv(fd_, buf, std::min(sizeof buf, max - out.size()), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  void Close() {
    if (fd_ >= 0) san_close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// STOR-like command over a SAN data connection: sends bytes, closes, returns the final reply
// (code in c.code()); "" if the data connection or the 150 failed.
std::string Upload(RawClient& c, const std::string& command, const std::string& bytes) {
  SanData data(c);
  if (!data.ok()) return "no data connection";
  if (c.Cmd(command) != 150) return "refused: " + std::to_string(c.code());
  if (!data.SendAll(bytes)) return "send failed";
  const bool shm = data.Shm();  // settled once the server accepted (after its 150)
  data.Close();
  const std::string reply = c.Reply();
  return shm ? reply : "our side not on shm; " + reply;
}

std::string Download(RawClient& c, const std::string& command, std::string* reply) {
  SanData data(c);
  if (!data.ok()) return "no data connection";
  if (c.Cmd(command) != 150) return "refused: " + std::to_string(c.code());
  std::string got = data.Read();
  const bool shm = data.Shm();
  data.Close();
  *reply = c.Reply();
  if (!shm) reply->append(" (our side not on shm)");
  return got;
}

// No ".name.part-*" (STOR's temporary files) left in dir.
bool NoPartFiles(const std::string& dir) {
  RunResult ls = RunProgram({"ls", "-a", dir});
  return ls.exit_code == 0 && ls.out.find(".part-") == std::string::npos;
}

TEST(FtpSanData, StorAppeRestStouAndAsciiOverShm) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  ASSERT_EQ(c.Cmd("TYPE I"), 200);
  const std::string big = RandomBytes(3 << 20, 11);
  std::string r = Upload(c, "STOR f.bin", big);
  EXPECT_EQ(c.code(), 226) << r;
  EXPECT_NE(r.find("3145728 bytes"), std::string::npos) << r;
  EXPECT_NE(r.find("data path shm"), std::string::npos) << r;
  EXPECT_TRUE(ReadFile(s.root() + "/f.bin") == big);
  // APPE extends in place.
  const std::string tail = RandomBytes(700000, 12);
  r = Upload(c, "APPE f.bin", tail);
  EXPECT_EQ(c.code(), 226) << r;
  EXPECT_TRUE(ReadFile(s.root() + "/f.bin") == big + tail);
  // REST + STOR writes from the offset and cuts what lay beyond.
  EXPECT_EQ(c.Cmd("REST 1000000"), 350);
  const std::string mid = RandomBytes(1500000, 13);
  r = Upload(c, "STOR f.bin", mid);
  EXPECT_EQ(c.code(), 226) << r;
  EXPECT_TRUE(ReadFile(s.root() + "/f.bin") == big.substr(0, 1000000) + mid);
  // STOU picks a fresh name.
  r = Upload(c, "STOU f.bin", "unique");
  EXPECT_EQ(c.code(), 226) << r;
  EXPECT_EQ(ReadFile(s.root() + "/f.bin.1"), "unique");
  // RETR, whole and from a REST offset.
  std::string reply;
  std::string got = Download(c, "RETR f.bin", &reply);
  EXPECT_EQ(c.code(), 226) << reply;
  EXPECT_NE(reply.find("data path shm"), std::string::npos) << reply;
  EXPECT_TRUE(got == big.substr(0, 1000000) + mid) << got.size();
  EXPECT_EQ(reply.find("not on shm"), std::string::npos) << reply;
  EXPECT_EQ(c.Cmd("REST 2400000"), 350);
  got = Download(c, "RETR f.bin", &reply);
  EXPECT_EQ(c.code(), 226) << reply;
  EXPECT_TRUE(got == mid.substr(1400000)) << got.size();
  EXPECT_EQ(reply.find("not on shm"), std::string::npos) << reply;
  // TYPE A converts on the shm path too.
  ASSERT_EQ(c.Cmd("TYPE A"), 200);
  r = Upload(c, "STOR t.txt", "a\r\nb\rc\r\n\r\nend\r");
  EXPECT_EQ(c.code(), 226) << r;
  EXPECT_EQ(ReadFile(s.root() + "/t.txt"), "a\nb\rc\n\nend\r");
  got = Download(c, "RETR t.txt", &reply);
  EXPECT_EQ(got, "a\r\nb\rc\r\n\r\nend\r");
  EXPECT_EQ(reply.find("not on shm"), std::string::npos) << reply;
  EXPECT_TRUE(NoPartFiles(s.root()));
}

TEST(FtpSanData, AborOverShmInBothDirections) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  {  // 256 MiB of zeros (sparse): far more than the channel holds.
    const int fd = open((s.root() + "/huge").c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_EQ(ftruncate(fd, 256 << 20), 0);
    close(fd);
  }
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  ASSERT_EQ(c.Cmd("TYPE I"), 200);
  {
    SanData data(c);
    ASSERT_TRUE(data.ok());
    ASSERT_EQ(c.Cmd("RETR huge"), 150);
    ASSERT_EQ(data.Read(4096).size(), 4096u);  // running; we stop reading
    EXPECT_TRUE(data.Shm());
    ASSERT_TRUE(c.Send("ABOR\r\n"));
    c.Reply();
    EXPECT_EQ(c.code(), 426);
    c.Reply();
    EXPECT_EQ(c.code(), 226);
  }
  {
    SanData data(c);
    ASSERT_TRUE(data.ok());
    ASSERT_EQ(c.Cmd("STOR part.bin"), 150);
    ASSERT_TRUE(data.SendAll(RandomBytes(1 << 20, 14)));  // and then nothing, still open
    EXPECT_TRUE(data.Shm());
    ASSERT_TRUE(c.Send("ABOR\r\n"));
    c.Reply();
    EXPECT_EQ(c.code(), 426);
    c.Reply();
    EXPECT_EQ(c.code(), 226);
  }
  EXPECT_EQ(c.Cmd("NOOP"), 200);
  EXPECT_FALSE(Exists(s.root() + "/part.bin"));
  EXPECT_TRUE(NoPartFiles(s.root()));
  const std::string log = ReadFile(s.xferlog());
  EXPECT_NE(log.find("/huge b _ o r alice ftp 0 * i"), std::string::npos) << log;
  EXPECT_NE(log.find("/part.bin b _ i r alice ftp 0 * i"), std::string::npos) << log;
}

TEST(FtpSanData, StalledShmPeersTimeOut) {
  FtpdServer s({"--data-timeout", "1"});
  ASSERT_TRUE(s.ok());
  {
    const int fd = open((s.root() + "/huge").c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_EQ(ftruncate(fd, 256 << 20), 0);
    close(fd);
  }
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  ASSERT_EQ(c.Cmd("TYPE I"), 200);
  {
    SanData data(c);
    ASSERT_TRUE(data.ok());
    ASSERT_EQ(c.Cmd("RETR huge"), 150);
    ASSERT_EQ(data.Read(4096).size(), 4096u);
    EXPECT_TRUE(data.Shm());
    EXPECT_NE(c.Reply(15000).find("timed out"), std::string::npos);  // a reader that never reads
    EXPECT_EQ(c.code(), 426);
  }
  {
    SanData data(c);
    ASSERT_TRUE(data.ok());
    ASSERT_EQ(c.Cmd("STOR slow.bin"), 150);
    ASSERT_TRUE(data.SendAll("a little"));  // a writer that stops writing
    EXPECT_TRUE(data.Shm());
    EXPECT_NE(c.Reply(15000).find("timed out"), std::string::npos);
    EXPECT_EQ(c.code(), 426);
  }
  EXPECT_EQ(c.Cmd("NOOP"), 200);
  EXPECT_FALSE(Exists(s.root() + "/slow.bin"));
  EXPECT_TRUE(NoPartFiles(s.root()));
}

}  // namespace
}  // namespace san::ftp::testing
