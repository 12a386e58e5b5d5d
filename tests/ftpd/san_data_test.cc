// ftpd's transfers over an accelerated (shm) data connection, driven by hand: the control
// connection is a raw kernel TCP client (RawClient), the data connection a SAN socket of this
// test process, so ftpd's side of it is on shm and its one-copy file paths (san_recvfile into the
// file, san_sendfile out of it) are the ones exercised -- with REST, APPE, STOU, TYPE A, ABOR in
// both directions and data timeouts, which ftp_client never sends by itself. FtpSendfile runs
// RETR's san_sendfile path on shm and on TCP data connections (the test's socket a kernel one):
// REST offsets, files that shrink or grow mid-transfer, ABOR and a resumed RETR.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "ftp/protocol/address.h"
#include "ftp_test_util.h"
#include "san/san.h"

namespace san::ftp::testing {
namespace {

// A data connection to the server's PASV port: a SAN socket (shm with ftpd), or with san = false a
// plain kernel socket (ftpd's side then falls back to TCP). san_* calls pass kernel fds through.
class SanData {
 public:
  explicit SanData(RawClient& c, bool san = true) {
    if (!c.Send("PASV\r\n")) return;
    const std::string text = c.Reply();
    if (c.code() != 227) return;
    std::optional<HostPort> hp = ParsePasvReply(text);
    if (!hp) return;
    fd_ = san ? san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0)
              : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

// Pseudo-random bytes, fast enough for tens of MiB under ASan (splitmix64): every position has its
// own value, so a lost, repeated or reordered chunk shows as a mismatch.
std::string PatternBytes(size_t n, uint64_t seed) {
  std::string out(n, '\0');
  uint64_t x = seed;
  for (size_t i = 0; i < n; i += 8) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    memcpy(&out[i], &z, std::min<size_t>(8, n - i));
  }
  return out;
}

// "... N bytes in ..." of a 226, or -1.
long long ReplyBytes(const std::string& reply) {
  const size_t at = reply.find(" bytes in ");
  if (at == std::string::npos) return -1;
  const size_t start = reply.rfind(' ', at - 1);
  return std::atoll(reply.substr(start + 1, at - start - 1).c_str());
}

// Binary RETR goes through san_sendfile on every data connection: shm (sanlib's copy into the
// channel) and TCP (the kernel's sendfile). Both are run by the tests below.
class FtpSendfile : public ::testing::TestWithParam<bool> {
 protected:
  bool san() const { return GetParam(); }
  // The data path the 226 must name.
  std::string path() const { return san() ? "data path shm" : "data path tcp"; }
};

INSTANTIATE_TEST_SUITE_P(FtpDataPaths, FtpSendfile, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "Shm" : "Tcp");
                         });

// Every REST offset around the 1 MiB sendfile chunks and the file's ends gives exactly the tail.
TEST_P(FtpSendfile, RetrFromRestOffsetsIsByteExact) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  const std::string file = PatternBytes((5 << 20) + 4321, 21);
  WriteFile(s.root() + "/f.bin", file);
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  ASSERT_EQ(c.Cmd("TYPE I"), 200);
  for (size_t offset :
       {size_t{0}, size_t{1}, size_t{(1 << 20) - 1}, size_t{1 << 20}, size_t{(1 << 20) + 1},
        size_t{(3 << 20) + 7}, file.size() - 1, file.size()}) {
    SCOPED_TRACE(offset);
    ASSERT_EQ(c.Cmd("REST " + std::to_string(offset)), 350);
    SanData data(c, san());
    ASSERT_TRUE(data.ok());
    ASSERT_EQ(c.Cmd("RETR f.bin"), 150);
    const std::string got = data.Read();
    data.Close();
    const std::string reply = c.Reply();
    EXPECT_EQ(c.code(), 226) << reply;
    EXPECT_NE(reply.find(path()), std::string::npos) << reply;
    EXPECT_EQ(ReplyBytes(reply), static_cast<long long>(file.size() - offset)) << reply;
    ASSERT_EQ(got.size(), file.size() - offset);
    EXPECT_TRUE(got == file.substr(offset));
  }
}

// A file cut short during RETR: the transfer ends at the new end (san_sendfile reads 0 there), the
// reader gets a prefix of the original bytes, and the 226 and the xferlog count exactly those.
// A file that grows during RETR is sent to its new end.
TEST_P(FtpSendfile, RetrOfAFileThatShrinksOrGrows) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  // Far more than the connection buffers (a few MiB of shm channel, or of kernel socket buffers
  // on both ends) hold while we do not read, so the server is still sending when the file changes.
  const size_t size = 32 << 20, cut = 2 << 20;
  const std::string file = PatternBytes(size, 22);
  const std::string more = PatternBytes(1 << 20, 23);
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  ASSERT_EQ(c.Cmd("TYPE I"), 200);
  for (const bool shrink : {true, false}) {
    SCOPED_TRACE(shrink ? "shrinks" : "grows");
    const std::string name = shrink ? "/cut.bin" : "/grow.bin";
    WriteFile(s.root() + name, file);
    SanData data(c, san());
    ASSERT_TRUE(data.ok());
    ASSERT_EQ(c.Cmd("RETR " + name.substr(1)), 150);
    std::string got = data.Read(1 << 20);  // running; the server is ahead by what the buffers hold
    ASSERT_EQ(got.size(), size_t{1} << 20);
    if (shrink) {
      ASSERT_EQ(truncate((s.root() + name).c_str(), static_cast<off_t>(cut)), 0);
    } else {
      const int fd = open((s.root() + name).c_str(), O_WRONLY | O_APPEND);
      ASSERT_GE(fd, 0);
      ASSERT_EQ(write(fd, more.data(), more.size()), static_cast<ssize_t>(more.size()));
      close(fd);
    }
    got += data.Read();
    data.Close();
    const std::string reply = c.Reply();
    EXPECT_EQ(c.code(), 226) << reply;
    EXPECT_NE(reply.find(path()), std::string::npos) << reply;
    EXPECT_EQ(ReplyBytes(reply), static_cast<long long>(got.size())) << reply;
    if (shrink) {
      EXPECT_GE(got.size(), cut);
      EXPECT_LT(got.size(), size);  // it did stop early
      EXPECT_TRUE(got == file.substr(0, got.size())) << got.size();
    } else {
      EXPECT_EQ(got.size(), size + more.size());
      EXPECT_TRUE(got == file + more);
    }
    // append, not " " + ...: GCC 12 -Wrestrict false positive in release builds
    std::string record(1, ' ');
    record.append(std::to_string(got.size())).append(" ").append(name).append(" b _ o r");
    EXPECT_NE(ReadFile(s.xferlog()).find(record), std::string::npos) << ReadFile(s.xferlog());
  }
}

// ABOR mid-RETR: 426 + 226, what arrived is the file's start, the xferlog counts what was sent
// (incomplete), and a REST from what arrived fetches exactly the rest.
TEST_P(FtpSendfile, AborMidRetrThenRestResumesExactly) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  const std::string file = PatternBytes(32 << 20, 24);
  WriteFile(s.root() + "/f.bin", file);
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  ASSERT_EQ(c.Cmd("TYPE I"), 200);
  std::string got;
  {
    SanData data(c, san());
    ASSERT_TRUE(data.ok());
    ASSERT_EQ(c.Cmd("RETR f.bin"), 150);
    got = data.Read(3 << 20);
    ASSERT_EQ(got.size(), size_t{3} << 20);
    ASSERT_TRUE(c.Send("ABOR\r\n"));
    c.Reply();
    EXPECT_EQ(c.code(), 426);
    c.Reply();
    EXPECT_EQ(c.code(), 226);
  }
  EXPECT_TRUE(got == file.substr(0, got.size()));
  const std::string log = ReadFile(s.xferlog());
  EXPECT_NE(log.find("/f.bin b _ o r alice ftp 0 * i"), std::string::npos) << log;
  ASSERT_EQ(c.Cmd("REST " + std::to_string(got.size())), 350);
  std::string reply;
  SanData data(c, san());
  ASSERT_TRUE(data.ok());
  ASSERT_EQ(c.Cmd("RETR f.bin"), 150);
  got += data.Read();
  data.Close();
  reply = c.Reply();
  EXPECT_EQ(c.code(), 226) << reply;
  EXPECT_NE(reply.find(path()), std::string::npos) << reply;
  ASSERT_EQ(got.size(), file.size());
  EXPECT_TRUE(got == file);
}

}  // namespace
}  // namespace san::ftp::testing
