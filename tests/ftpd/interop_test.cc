// Interop with real peers, all started by the tests on ports chosen at run time:
//   - curl, lftp and tnftp against our ftpd (upload, byte-exact download, listing, resume with
//   REST,
//     rename, delete; passive and active): they are plain TCP clients, so the data path must
//     fall back to TCP and still work;
//   - our ftp_client against our ftpd: control upgraded (AUTH SAN) and data connections on shm;
//   - our ftp_client against vsftpd (started here as a child with a generated config);
//   - ftpd run by openbsd-inetd (foreground, own config): ftp_client gets the SAN upgrade,
//     lftp works without it.
// A test whose peer program is not installed is skipped, saying which.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "ftp_test_util.h"
#include "ftpd/auth/users.h"
#include "san/san.h"

namespace san::ftp::testing {
namespace {

#define REQUIRE_PROGRAM(p) \
  if (!Installed(p)) GTEST_SKIP() << p << " is not installed"

// Writes `n` pseudo-random bytes (RandomBytes `seed`) to `path`; returns their checksum, which the
// copies the peers make must match.
std::string WriteRandomFile(const std::string& path, size_t n, unsigned seed) {
  WriteFile(path, RandomBytes(n, seed));
  return Checksum(path);
}

std::string Lftp(const std::string& open_url, const std::string& commands, bool passive) {
  const std::string script = std::string(
                                 "set ftp:ssl-allow no; set net:max-retries 1; "
                                 "set net:timeout 10; set cmd:fail-exit yes; "
                                 "set ftp:passive-mode ") +
                             (passive ? "on" : "off") + "; open " + open_url + "; " + commands;
  RunResult r = RunProgram({"lftp", "-c", script}, 60);
  return r.exit_code == 0 ? "ok:" + r.out
                          : "FAILED(" + std::to_string(r.exit_code) + "): " + r.err + r.out;
}

TEST(FtpInterop, CurlUploadDownloadListResumePassiveAndActive) {
  REQUIRE_PROGRAM("curl");
  FtpdServer s;
  ASSERT_TRUE(s.ok()) << s.log();
  TempDir local;
  const std::string sum = WriteRandomFile(local / "src.bin", 3 << 20, 7);
  // Upload (passive, EPSV), then download it three ways: EPSV, PASV and active (EPRT/PORT).
  RunResult up = RunProgram({"curl", "-sS", "-T", local / "src.bin", s.url("up.bin")});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  EXPECT_EQ(Checksum(s.root() + "/up.bin"), sum);
  const std::vector<std::vector<std::string>> modes = {
      {}, {"--disable-epsv"}, {"-P", "127.0.0.1"}, {"-P", "127.0.0.1", "--disable-eprt"}};
  int i = 0;
  for (const auto& mode : modes) {
    const std::string out = local / ("down" + std::to_string(i++));
    std::vector<std::string> argv = {"curl", "-sS", "-v", "-o", out};
    argv.insert(argv.end(), mode.begin(), mode.end());
    argv.push_back(s.url("up.bin"));
    RunResult r = RunProgram(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Checksum(out), sum) << i;
    // curl is not a sanlib program: the data connection fell back to TCP, and says so.
    EXPECT_NE(r.err.find("data path tcp"), std::string::npos) << r.err;
  }
  // Resume a download that stopped halfway (REST).
  const std::string partial = local / "partial";
  WriteFile(partial, ReadFile(local / "src.bin").substr(0, 1234567));
  RunResult resume = RunProgram({"curl", "-sS", "-v", "-C", "-", "-o", partial, s.url("up.bin")});
  ASSERT_EQ(resume.exit_code, 0) << resume.err;
  EXPECT_NE(resume.err.find("REST 1234567"), std::string::npos);
  EXPECT_EQ(Checksum(partial), sum);
  // Listing, and rename + delete through -Q.
  RunResult list = RunProgram({"curl", "-sS", s.url("")});
  EXPECT_NE(list.out.find("up.bin"), std::string::npos) << list.out;
  RunResult ops = RunProgram({"curl", "-sS", "-Q", "RNFR up.bin", "-Q", "RNTO moved.bin", "-Q",
                              "DELE moved.bin", s.url("")});
  EXPECT_EQ(ops.exit_code, 0) << ops.err;
  EXPECT_FALSE(Exists(s.root() + "/up.bin"));
  EXPECT_FALSE(Exists(s.root() + "/moved.bin"));
  // The xferlog saw the transfers.
  EXPECT_NE(ReadFile(s.xferlog()).find("/up.bin b _ i r alice ftp 0 * c"), std::string::npos);
}

TEST(FtpInterop, LftpPassiveAndActive) {
  REQUIRE_PROGRAM("lftp");
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  TempDir local;
  const std::string sum = WriteRandomFile(local / "src.bin", 2 << 20, 11);
  const std::string open = "-u alice,secret ftp://127.0.0.1:" + std::to_string(s.port());
  for (bool passive : {true, false}) {
    SCOPED_TRACE(passive ? "passive" : "active");
    const std::string got = local / (passive ? "p.bin" : "a.bin");
    std::string r =
        Lftp(open,
             "mkdir dir; put " + local / "src.bin" + " -o dir/up.bin; ls dir; get dir/up.bin -o " +
                 got + "; mv dir/up.bin dir/renamed.bin; cls dir",
             passive);
    ASSERT_EQ(r.substr(0, 3), "ok:") << r;
    EXPECT_NE(r.find("up.bin"), std::string::npos) << r;
    EXPECT_NE(r.find("renamed.bin"), std::string::npos) << r;
    EXPECT_EQ(Checksum(got), sum);
    EXPECT_EQ(Checksum(s.root() + "/dir/renamed.bin"), sum);
    r = Lftp(open, "rm dir/renamed.bin; rmdir dir", passive);
    ASSERT_EQ(r.substr(0, 3), "ok:") << r;
    EXPECT_FALSE(Exists(s.root() + "/dir"));
  }
  // Resume: lftp continues a partial download with REST.
  WriteFile(s.root() + "/big.bin", ReadFile(local / "src.bin"));
  WriteFile(local / "part.bin", ReadFile(local / "src.bin").substr(0, 700000));
  std::string r = Lftp(open, "get -c big.bin -o " + local / "part.bin", true);
  ASSERT_EQ(r.substr(0, 3), "ok:") << r;
  EXPECT_EQ(Checksum(local / "part.bin"), sum);
}

TEST(FtpInterop, TnftpPassiveActiveResume) {
  REQUIRE_PROGRAM("tnftp");
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  TempDir local;
  const std::string sum = WriteRandomFile(local / "src.bin", 2 << 20, 13);
  WriteFile(local / "part.bin", ReadFile(local / "src.bin").substr(0, 333333));
  const std::string script =
      "user alice secret\nbinary\n"
      "put " +
      local / "src.bin" +
      " up.bin\n"  // passive (EPSV)
      "epsv4 off\nget up.bin " +
      local / "pasv.bin" +
      "\n"  // PASV
      "passive off\nget up.bin " +
      local / "active.bin" +
      "\n"  // EPRT/PORT
      "passive on\nreget up.bin " +
      local / "part.bin" +
      "\n"  // REST
      "rename up.bin moved.bin\nls\ndelete moved.bin\nbye\n";
  RunResult r =
      RunProgram({"tnftp", "-n", "-v", "127.0.0.1", std::to_string(s.port())}, 60, script);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Checksum(local / "pasv.bin"), sum) << r.out;
  EXPECT_EQ(Checksum(local / "active.bin"), sum) << r.out;
  EXPECT_EQ(Checksum(local / "part.bin"), sum) << r.out;
  EXPECT_NE(r.out.find("350 Restarting at 333333"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("moved.bin"), std::string::npos) << r.out;
  EXPECT_FALSE(Exists(s.root() + "/moved.bin"));
  EXPECT_FALSE(Exists(s.root() + "/up.bin"));
}

TEST(FtpInterop, FtpClientAgainstFtpdIsAcceleratedBothWays) {
  // Run by root (CI), the session chroots (--chroot auto): its data connections are shm all the
  // same (sanlib's shm set-up does not need /proc).
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  TempDir local;
  const std::string sum = WriteRandomFile(local / "src.bin", 5 << 20, 3);
  for (const char* mode : {"--timeout=20000", "--active"}) {
    SCOPED_TRACE(mode);
    RunResult put =
        RunProgram({FTP_CLIENT_BIN, "-v", mode, "--put", local / "src.bin", s.url("up.bin")});
    ASSERT_EQ(put.exit_code, 0) << put.err;
    EXPECT_EQ(Checksum(s.root() + "/up.bin"), sum);
    RunResult get =
        RunProgram({FTP_CLIENT_BIN, "-v", mode, s.url("up.bin"), "-o", local / "got.bin"});
    ASSERT_EQ(get.exit_code, 0) << get.err;
    EXPECT_EQ(Checksum(local / "got.bin"), sum);
    for (const RunResult* r : {&put, &get}) {
      // Our side's data socket and the server's (from its 226 reply) are both on shm, and the
      // control connection was upgraded in band.
      EXPECT_NE(r->err.find("--- data connection: shm"), std::string::npos) << r->err;
      EXPECT_NE(r->err.find("data path shm."), std::string::npos) << r->err;
      EXPECT_NE(r->err.find("--- control connection: shm"), std::string::npos) << r->err;
      EXPECT_NE(r->err.find("5242880 bytes in "), std::string::npos) << r->err;
      EXPECT_NE(r->err.find(" MB/s)"), std::string::npos) << r->err;
    }
  }
  // Resumed transfers over shm: the client's san_recvfile appends at the local file's end after
  // REST, the server's at the REST offset of its file.
  WriteFile(local / "part.bin", ReadFile(local / "src.bin").substr(0, 1234567));
  RunResult rget =
      RunProgram({FTP_CLIENT_BIN, "-v", "--resume", s.url("up.bin"), "-o", local / "part.bin"});
  ASSERT_EQ(rget.exit_code, 0) << rget.err;
  EXPECT_NE(rget.err.find("REST 1234567"), std::string::npos) << rget.err;
  EXPECT_NE(rget.err.find("data path shm."), std::string::npos) << rget.err;
  EXPECT_EQ(Checksum(local / "part.bin"), sum);
  WriteFile(s.root() + "/rput.bin", ReadFile(local / "src.bin").substr(0, 2000000));
  RunResult rput =
      RunProgram({FTP_CLIENT_BIN, "-v", "--resume", "--put", local / "src.bin", s.url("rput.bin")});
  ASSERT_EQ(rput.exit_code, 0) << rput.err;
  EXPECT_NE(rput.err.find("REST 2000000"), std::string::npos) << rput.err;
  EXPECT_NE(rput.err.find("data path shm."), std::string::npos) << rput.err;
  EXPECT_EQ(Checksum(s.root() + "/rput.bin"), sum);
  // Without the upgrade the control connection stays TCP, the data still goes over shm.
  RunResult plain =
      RunProgram({FTP_CLIENT_BIN, "-v", "--no-upgrade", s.url("up.bin"), "-o", local / "g2.bin"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err.find("AUTH SAN"), std::string::npos);
  EXPECT_NE(plain.err.find("data path shm."), std::string::npos) << plain.err;
  // A client with sanlib switched off asks for AUTH SAN, declines the upgrade itself, and both
  // ends carry on over TCP.
  RunResult off = RunProgram(
      {"env", "SAN_PROVIDER=off", FTP_CLIENT_BIN, "-v", s.url("up.bin"), "-o", local / "g3.bin"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(Checksum(local / "g3.bin"), sum);
  EXPECT_NE(off.err.find("234 AUTH SAN"), std::string::npos) << off.err;
  EXPECT_NE(off.err.find("data path tcp"), std::string::npos) << off.err;
}

TEST(FtpInterop, FtpClientBatchExitCodesAndListing) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  WriteFile(s.root() + "/there.txt", "x");
  TempDir local;
  RunResult list = RunProgram({FTP_CLIENT_BIN, "--list", s.url("")});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("there.txt"), std::string::npos);
  EXPECT_EQ(RunProgram({FTP_CLIENT_BIN, "not-a-url://x"}).exit_code, 1);
  EXPECT_EQ(RunProgram({FTP_CLIENT_BIN, "ftp://127.0.0.1:1/x", "-o", local / "x"}).exit_code, 2);
  EXPECT_EQ(
      RunProgram({FTP_CLIENT_BIN, "ftp://alice:nope@127.0.0.1:" + std::to_string(s.port()) + "/x",
                  "-o", local / "x"})
          .exit_code,
      3);
  EXPECT_EQ(RunProgram({FTP_CLIENT_BIN, s.url("missing.txt"), "-o", local / "x"}).exit_code, 4);
  EXPECT_EQ(RunProgram({FTP_CLIENT_BIN, "--put", local / "no-such-file", s.url("")}).exit_code, 6);
  EXPECT_EQ(
      RunProgram({FTP_CLIENT_BIN, "--put", s.root() + "/there.txt", s.url("", "bob")}).exit_code,
      4);
  RunResult out = RunProgram({FTP_CLIENT_BIN, s.url("there.txt"), "-o", "-"});
  EXPECT_EQ(out.exit_code, 0);
  EXPECT_EQ(out.out, "x");
}

TEST(FtpInterop, FtpClientInteractiveFromStdin) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  TempDir local;
  WriteFile(local / "a.txt", "alpha\n");
  WriteFile(local / "b.txt", "beta\n");
  const std::string script = "user alice secret\nbinary\nmkdir d\ncd d\nmput " + local / "*.txt" +
                             "\nls\npwd\nhash\nget a.txt " + local / "a2.txt" +
                             "\nrename b.txt c.txt\n"
                             "size c.txt\nlcd " +
                             local / "m" + "\nmget *.txt\ndelete a.txt\npassive\ndir\nbye\n";
  mkdir((local / "m").c_str(), 0755);
  RunResult r = RunProgram({FTP_CLIENT_BIN, "127.0.0.1", std::to_string(s.port())}, 30, script);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(ReadFile(local / "a2.txt"), "alpha\n");
  EXPECT_EQ(ReadFile(s.root() + "/d/c.txt"), "beta\n");
  EXPECT_FALSE(Exists(s.root() + "/d/a.txt"));
  EXPECT_EQ(ReadFile(local / "m/a.txt"), "alpha\n");  // mget: NLST *.txt matched both
  EXPECT_EQ(ReadFile(local / "m/c.txt"), "beta\n");
  EXPECT_NE(r.out.find("6 bytes in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("213 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Passive mode off."), std::string::npos);
  EXPECT_NE(r.out.find("c.txt"), std::string::npos);
  EXPECT_NE(r.out.find("221 "), std::string::npos);
}

// Text for TYPE A tests: lines ended by LF, some by CRLF (kept as data: CR CR LF on the wire),
// lone CRs inside lines, and no final newline; about `n` bytes, so that CRs and LFs fall on every
// kind of chunk boundary of a 256 KiB buffer.
std::string TextFile(size_t n, unsigned seed) {
  const std::string noise = RandomBytes(n, seed);
  std::string text;
  for (size_t i = 0; text.size() < n; ++i) {
    const unsigned char r = static_cast<unsigned char>(noise[i % noise.size()]);
    if (r < 20) {
      text.push_back('\n');
    } else if (r < 23) {
      text.append("\r\n");
    } else if (r < 25) {
      text.push_back('\r');
    } else {
      text.push_back(static_cast<char>('a' + r % 26));
    }
  }
  return text + "end";
}

// "" if equal, else where they first differ (gtest's own diff of two large strings takes minutes).
std::string Difference(const std::string& got, const std::string& want) {
  if (got == want) return "";
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return "sizes " + std::to_string(got.size()) + " and " + std::to_string(want.size()) +
         ", first difference at byte " + std::to_string(i) + ": " +
         ::testing::PrintToString(got.substr(i, 8)) + " instead of " +
         ::testing::PrintToString(want.substr(i, 8));
}

size_t CountLf(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// TYPE A between our client and our server: LF -> CRLF on the wire both ways and back (the client
// reports bytes on the wire: the file's plus one CR per LF), so text goes through unchanged; binary
// gets of the same file are byte-exact; interactive mode switches with ascii/binary.
TEST(FtpInterop, FtpClientAsciiAgainstFtpd) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  TempDir local;
  const std::string text = TextFile(700000, 41);
  WriteFile(local / "text.txt", text);
  const std::string wire_bytes = std::to_string(text.size() + CountLf(text)) + " bytes in ";
  for (const char* mode : {"--timeout=20000", "--active"}) {
    SCOPED_TRACE(mode);
    RunResult put = RunProgram(
        {FTP_CLIENT_BIN, "-v", mode, "--ascii", "--put", local / "text.txt", s.url("t.txt")});
    ASSERT_EQ(put.exit_code, 0) << put.err;
    EXPECT_NE(put.err.find("TYPE A"), std::string::npos) << put.err;
    EXPECT_NE(put.err.find(wire_bytes), std::string::npos) << put.err;
    EXPECT_EQ(Difference(ReadFile(s.root() + "/t.txt"), text), "");
    RunResult get =
        RunProgram({FTP_CLIENT_BIN, "-v", mode, "--ascii", s.url("t.txt"), "-o", local / "a.txt"});
    ASSERT_EQ(get.exit_code, 0) << get.err;
    EXPECT_NE(get.err.find(wire_bytes), std::string::npos) << get.err;
    EXPECT_EQ(Difference(ReadFile(local / "a.txt"), text), "");
  }
  RunResult bin = RunProgram({FTP_CLIENT_BIN, s.url("t.txt"), "-o", local / "b.txt"});
  ASSERT_EQ(bin.exit_code, 0) << bin.err;
  EXPECT_EQ(Difference(ReadFile(local / "b.txt"), text), "");
  // A REST offset counts the server's bytes: not with --ascii.
  RunResult both = RunProgram({FTP_CLIENT_BIN, "--ascii", "--resume", s.url("t.txt")});
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("--resume needs binary"), std::string::npos) << both.err;
  // Interactive: binary after login (SYST says UNIX L8), ascii on request, status says which.
  RunResult r = RunProgram({FTP_CLIENT_BIN, "127.0.0.1", std::to_string(s.port())}, 30,
                           "user alice secret\nstatus\nascii\nstatus\nput " + local / "text.txt" +
                               " i.txt\nget i.txt " + local / "ia.txt" + "\nbinary\nget i.txt " +
                               local / "ib.txt" + "\nbye\n");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Using binary mode to transfer files."), std::string::npos) << r.out;
  const size_t binary_at = r.out.find("Type: binary");
  const size_t ascii_at = r.out.find("Type: ascii");
  ASSERT_NE(binary_at, std::string::npos) << r.out;
  ASSERT_NE(ascii_at, std::string::npos) << r.out;
  EXPECT_LT(binary_at, ascii_at);
  EXPECT_EQ(Difference(ReadFile(s.root() + "/i.txt"), text), "");
  EXPECT_EQ(Difference(ReadFile(local / "ia.txt"), text), "");
  EXPECT_EQ(Difference(ReadFile(local / "ib.txt"), text), "");
  EXPECT_NE(r.out.find(wire_bytes), std::string::npos) << r.out;
}

// The local file failing during a transfer (ENOSPC, EFBIG) is told apart from the network: the
// client's download into /dev/full or past its RLIMIT_FSIZE exits 6 (local file error); the
// server's upload past its RLIMIT_FSIZE answers 451, removes the partial file and goes on serving.
// Both over the SAN path (ftp_client) and the server's over TCP (curl).
TEST(FtpInterop, LocalFileErrorsDuringTransfers) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  rlimit small = saved;
  small.rlim_cur = 1 << 20;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  FtpdServer limited;  // inherits the 1 MiB limit
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &saved), 0);
  ASSERT_TRUE(limited.ok());
  TempDir local;
  const std::string big = RandomBytes(3 << 20, 77);
  WriteFile(local / "big.bin", big);
  WriteFile(limited.root() + "/big.bin", big);
  RunResult full = RunProgram({FTP_CLIENT_BIN, limited.url("big.bin"), "-o", "/dev/full"});
  EXPECT_EQ(full.exit_code, 6) << full.err;
  EXPECT_NE(full.err.find("local file"), std::string::npos) << full.err;
  if (Installed("prlimit")) {
    RunResult fsize = RunProgram({"prlimit", "--fsize=100000", FTP_CLIENT_BIN,
                                  limited.url("big.bin"), "-o", local / "part.bin"});
    EXPECT_EQ(fsize.exit_code, 6) << fsize.err;
    EXPECT_EQ(ReadFile(local / "part.bin"), big.substr(0, 100000));  // what fit is kept, in order
  }
  RunResult put =
      RunProgram({FTP_CLIENT_BIN, "-v", "--put", local / "big.bin", limited.url("up.bin")});
  EXPECT_EQ(put.exit_code, 4) << put.err;
  EXPECT_NE(put.err.find("451 "), std::string::npos) << put.err;
  EXPECT_FALSE(Exists(limited.root() + "/up.bin"));
  if (Installed("curl")) {
    RunResult c = RunProgram({"curl", "-sS", "-T", local / "big.bin", limited.url("up2.bin")});
    EXPECT_NE(c.exit_code, 0);
    EXPECT_FALSE(Exists(limited.root() + "/up2.bin"));
  }
  RunResult ls = RunProgram({"ls", "-a", limited.root()});
  EXPECT_EQ(ls.out.find(".part"), std::string::npos) << ls.out;  // no partial file left behind
  WriteFile(local / "small.bin", "fits");
  RunResult ok = RunProgram({FTP_CLIENT_BIN, "--put", local / "small.bin", limited.url("s.bin")});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ReadFile(limited.root() + "/s.bin"), "fits");
  EXPECT_NE(ReadFile(limited.xferlog()).find(" i\n"), std::string::npos);  // logged incomplete
}

// One line from a kernel socket, read byte by byte (bounded by 10 s); "" on EOF or timeout.
std::string ReadLineFrom(int fd) {
  std::string line;
  char c = 0;
  while (line.size() < 4096) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0 || recv(fd, &c, 1, 0) != 1) return "";
    if (c == '\n') return line;
    if (c != '\r') line.push_back(c);
  }
  return line;
}

// The server's first upgrade bytes may travel in the same segment as its "234" (here forced with
// TCP_CORK: the 234 waits for the upgrade's own first message, and both leave together). The
// client must read the reply and nothing after it, or san_upgrade never sees the server's hello
// (before the fix: "san_upgrade: Connection timed out" after 5 s, or about one session in three
// without TCP_CORK once the control connection had TCP_NODELAY).
TEST(FtpInterop, ClientUpgradesWhenThe234AndTheUpgradeShareASegment) {
  const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(lfd, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  std::atomic<int> upgraded{-2};
  std::string heard;
  std::thread server([&] {
    pollfd p{lfd, POLLIN, 0};
    if (poll(&p, 1, 20000) != 1) return;
    const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    auto say = [fd](const std::string& text) { send(fd, text.data(), text.size(), MSG_NOSIGNAL); };
    say("220 a server that upgrades\r\n");
    heard = ReadLineFrom(fd);  // FEAT
    say("211-Features:\r\n AUTH SAN\r\n211 End\r\n");
    heard.append("|").append(ReadLineFrom(fd));  // AUTH SAN (append: GCC 12 -Wrestrict)
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one);
    say("234 upgrading\r\n");
    upgraded = san_upgrade(fd);
    san_close(fd);  // the client's login then fails: only the upgrade is under test
  });
  TempDir local;
  RunResult r =
      RunProgram({FTP_CLIENT_BIN, "-v", "--timeout=10000",
                  "ftp://u:p@127.0.0.1:" + std::to_string(port) + "/x", "-o", local / "x"});
  server.join();
  close(lfd);
  EXPECT_EQ(heard, "FEAT|AUTH SAN");
  EXPECT_EQ(upgraded.load(), 0);
  EXPECT_NE(r.err.find("--- control connection: shm"), std::string::npos) << r.err;
}

// A download over shm that stalls: the client's san_recvfile waits at most --timeout (its
// SO_RCVTIMEO), then the client gives up (exit 5) and closes the data connection. The server is a
// thread of this test (kernel TCP control, a SAN data listener, so the data connection is shm),
// which sends a little after its 150 and then nothing.
TEST(FtpInterop, ClientTimesOutOnAStalledShmDownload) {
  const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(lfd, 1), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int port = ntohs(a.sin_port);
  const int dl = san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0);
  ASSERT_GE(dl, 0);
  sockaddr_in d{};
  d.sin_family = AF_INET;
  d.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(san_bind(dl, reinterpret_cast<sockaddr*>(&d), sizeof d), 0);
  ASSERT_EQ(san_listen(dl, 1), 0);
  len = sizeof d;
  ASSERT_EQ(san_getsockname(dl, reinterpret_cast<sockaddr*>(&d), &len), 0);
  const int data_port = ntohs(d.sin_port);
  std::atomic<int> data_mode{-1};
  std::atomic<bool> saw_eof{false};
  std::thread server([&] {
    pollfd p{lfd, POLLIN, 0};
    if (poll(&p, 1, 20000) != 1) return;
    const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    auto say = [fd](const std::string& text) { send(fd, text.data(), text.size(), MSG_NOSIGNAL); };
    say("220 a server that stalls\r\n");
    for (int i = 0; i < 10; ++i) {
      const std::string line = ReadLineFrom(fd);
      const std::string verb = line.substr(0, 4);
      if (verb == "FEAT") {
        say("211 End\r\n");
      } else if (verb == "USER") {
        say("331 Password.\r\n");
      } else if (verb == "PASS") {
        say("230 Ok.\r\n");
      } else if (verb == "TYPE") {
        say("200 Ok.\r\n");
      } else if (verb == "SIZE") {
        say("213 1000000\r\n");
      } else if (verb == "EPSV") {
        say("229 Entering Extended Passive Mode (|||" + std::to_string(data_port) + "|)\r\n");
      } else if (verb == "RETR") {
        say("150 Here it comes.\r\n");
        pollfd dp{dl, POLLIN, 0};
        if (san_poll(&dp, 1, 10000) != 1) break;
        const int data = san_accept4(dl, nullptr, nullptr, SOCK_CLOEXEC);
        if (data < 0) break;
        san_send(data, "0123456789", 10, MSG_NOSIGNAL);
        san_info info{};
        if (san_getinfo(data, &info) == 0) data_mode = info.mode;
        pollfd wait{data, POLLIN, 0};  // and then nothing until the client gives up
        char c;
        saw_eof = san_poll(&wait, 1, 15000) == 1 && san_recv(data, &c, 1, 0) == 0;
        san_close(data);
        say("426 Connection closed; transfer aborted.\r\n");
        break;
      } else {
        break;
      }
    }
    close(fd);
  });
  TempDir local;
  const auto start = std::chrono::steady_clock::now();
  RunResult r =
      RunProgram({FTP_CLIENT_BIN, "--timeout=1000",
                  "ftp://u:p@127.0.0.1:" + std::to_string(port) + "/x", "-o", local / "x"});
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  server.join();
  close(lfd);
  san_close(dl);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  EXPECT_NE(r.err.find("timed out"), std::string::npos) << r.err;
  EXPECT_LT(secs, 10);  // one --timeout, not a hang (a loose bound: the machine may be loaded)
  EXPECT_TRUE(saw_eof.load());
  EXPECT_EQ(data_mode.load(), SAN_MODE_SHM);
  EXPECT_EQ(ReadFile(local / "x"), "0123456789");  // what came is kept
}

// pure-ftpd's programs: $PURE_FTPD_PREFIX (a tree from `dpkg-deb -x` of the pure-ftpd and
// pure-ftpd-common packages: Debian's pure-ftpd conflicts with vsftpd, and removing vsftpd also
// removes the 'ftp' user the vsftpd tests need), else /opt/pure-ftpd, else the installed package.
std::string PureFtpdPrefix() {
  std::vector<std::string> prefixes;
  if (const char* env = getenv("PURE_FTPD_PREFIX")) prefixes.push_back(env);
  prefixes.push_back("/opt/pure-ftpd");
  prefixes.push_back("");
  for (const std::string& p : prefixes) {
    if (Exists(p + "/usr/sbin/pure-ftpd") && Exists(p + "/usr/bin/pure-pw")) return p;
  }
  return "-";
}

// Our client against pure-ftpd (a virtual user from a puredb, chrooted by pure-ftpd): passive
// and active get, put, listing, resume, and the commands of interactive mode.
// ftp_client against a server we did not write, at `base`, serving `root` whose pub.bin is `bytes`
// long: passive and active gets byte-exact over TCP data connections, a listing that names
// pub.bin, and a resumed download (REST). `server_log` is shown when a get fails.
void ExpectGetsListAndResume(const std::string& base, const std::string& root, size_t bytes,
                             const std::string& server_log) {
  TempDir local;
  const std::string sum = Checksum(root + "/pub.bin");
  for (const char* mode : {"--timeout=20000", "--active"}) {
    SCOPED_TRACE(mode);
    RunResult get =
        RunProgram({FTP_CLIENT_BIN, "-v", mode, base + "pub.bin", "-o", local / "pub.bin"});
    ASSERT_EQ(get.exit_code, 0) << get.err << ReadFile(server_log);
    EXPECT_EQ(Checksum(local / "pub.bin"), sum);
    EXPECT_NE(get.err.find("--- data connection: tcp"), std::string::npos) << get.err;
    EXPECT_NE(get.err.find(std::to_string(bytes) + " bytes in "), std::string::npos);
  }
  RunResult list = RunProgram({FTP_CLIENT_BIN, "--list", base});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("pub.bin"), std::string::npos) << list.out;
  WriteFile(local / "part.bin", ReadFile(root + "/pub.bin").substr(0, 1000000));
  RunResult resume =
      RunProgram({FTP_CLIENT_BIN, "-v", "--resume", base + "pub.bin", "-o", local / "part.bin"});
  ASSERT_EQ(resume.exit_code, 0) << resume.err;
  EXPECT_NE(resume.err.find("REST 1000000"), std::string::npos);
  EXPECT_EQ(Checksum(local / "part.bin"), sum);
}

TEST(FtpInterop, FtpClientAgainstPureFtpd) {
  const std::string prefix = PureFtpdPrefix();
  if (prefix == "-") GTEST_SKIP() << "pure-ftpd not found (see PureFtpdPrefix)";
  if (geteuid() != 0) GTEST_SKIP() << "pure-ftpd's virtual users need root";
  passwd* nobody = getpwnam("nobody");
  if (!nobody) GTEST_SKIP() << "no user nobody for the virtual account";
  TempDir dir;
  const std::string root = dir / "home";
  mkdir(root.c_str(), 0755);
  ASSERT_EQ(chown(root.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  WriteFile(root + "/pub.bin", RandomBytes(3 << 20, 23));
  chmod((root + "/pub.bin").c_str(), 0644);
  // The account line written directly (pure-pw useradd would hash with argon2id at t=127: seconds
  // per login), with a crypt(3) hash pure-ftpd checks with crypt(); pure-pw compiles the db.
  san::Result<std::string> hash = HashPassword("secret");
  ASSERT_TRUE(hash.ok());
  WriteFile(dir / "passwd", "alice:" + *hash + ":" + std::to_string(nobody->pw_uid) + ":" +
                                std::to_string(nobody->pw_gid) + "::" + root + "/./::::::::::::\n");
  RunResult pw =
      RunProgram({prefix + "/usr/bin/pure-pw", "mkdb", dir / "pdb", "-f", dir / "passwd"});
  ASSERT_EQ(pw.exit_code, 0) << pw.out << pw.err;
  Process pure;
  int port = 0;
  for (int attempt = 0; attempt < 5 && !port; ++attempt) {
    const int p = FreeLoopbackPort();
    pure.Stop();
    // -E: no anonymous; -A: chroot everyone; -H: no DNS; -u 1: nobody's uid is allowed.
    ASSERT_TRUE(pure.Start({prefix + "/usr/sbin/pure-ftpd", "-S", "127.0.0.1," + std::to_string(p),
                            "-l", "puredb:" + dir / "pdb", "-E", "-A", "-H", "-u", "1"},
                           dir / "pure.log"));
    if (AcceptsConnections(p)) port = p;
  }
  ASSERT_NE(port, 0) << ReadFile(dir / "pure.log");
  const std::string base = "ftp://alice:secret@127.0.0.1:" + std::to_string(port) + "/";
  ExpectGetsListAndResume(base, root, 3145728, dir / "pure.log");
  TempDir local;
  WriteFile(local / "pub.bin", ReadFile(root + "/pub.bin"));
  const std::string sum = Checksum(root + "/pub.bin");
  for (const char* mode : {"--timeout=20000", "--active"}) {
    SCOPED_TRACE(mode);
    RunResult put = RunProgram({FTP_CLIENT_BIN, mode, "--put", local / "pub.bin", base + "up.bin"});
    ASSERT_EQ(put.exit_code, 0) << put.err;
    EXPECT_EQ(Checksum(root + "/up.bin"), sum);
  }
  // Interactive: directories, rename, size, delete, all answered by pure-ftpd.
  RunResult r = RunProgram({FTP_CLIENT_BIN, "127.0.0.1", std::to_string(port)}, 30,
                           "user alice secret\nbinary\nmkdir d\ncd d\nput " + local / "pub.bin" +
                               " p.bin\nrename p.bin q.bin\nsize q.bin\nls\ndelete q.bin\ncdup\n"
                               "rmdir d\nbye\n");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("213 3145728"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("q.bin"), std::string::npos) << r.out;
  EXPECT_FALSE(Exists(root + "/d"));
}

TEST(FtpInterop, FtpClientAgainstVsftpd) {
  VsftpdServer vsftpd;
  if (!vsftpd.skip_reason().empty()) GTEST_SKIP() << vsftpd.skip_reason();
  ASSERT_TRUE(vsftpd.ok()) << vsftpd.log();
  const std::string root = vsftpd.root();
  WriteFile(root + "/pub.bin", RandomBytes(4 << 20, 5));
  chmod((root + "/pub.bin").c_str(), 0644);
  const std::string base = vsftpd.base_url();
  ExpectGetsListAndResume(base, root, 4194304, vsftpd.log_path());
  TempDir local;
  WriteFile(local / "pub.bin", ReadFile(root + "/pub.bin"));
  RunResult put =
      RunProgram({FTP_CLIENT_BIN, "--put", local / "pub.bin", base + "incoming/up.bin"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_EQ(Checksum(root + "/incoming/up.bin"), Checksum(root + "/pub.bin"));
  // TYPE A. This vsftpd does not convert (ascii_upload_enable and ascii_download_enable are off
  // by default): its files show exactly what was on the wire. An upload of LF lines is stored
  // with CRLF (a CR already before an LF is data: CR CR LF); a download of CRLF lines arrives
  // with LF, and a lone CR (also a final one) stays.
  WriteFile(local / "lf.txt", "one\ntwo\r\nthree");
  RunResult aput = RunProgram(
      {FTP_CLIENT_BIN, "-v", "--ascii", "--put", local / "lf.txt", base + "incoming/lf.txt"});
  ASSERT_EQ(aput.exit_code, 0) << aput.err;
  EXPECT_NE(aput.err.find("TYPE A"), std::string::npos) << aput.err;
  EXPECT_EQ(ReadFile(root + "/incoming/lf.txt"), "one\r\ntwo\r\r\nthree");
  WriteFile(root + "/crlf.txt", "alpha\r\nbeta\rgamma\r\n\r\nend\r");
  chmod((root + "/crlf.txt").c_str(), 0644);
  for (const char* mode : {"--timeout=20000", "--active"}) {
    SCOPED_TRACE(mode);
    RunResult aget =
        RunProgram({FTP_CLIENT_BIN, "--ascii", mode, base + "crlf.txt", "-o", local / "crlf.txt"});
    ASSERT_EQ(aget.exit_code, 0) << aget.err;
    EXPECT_EQ(ReadFile(local / "crlf.txt"), "alpha\nbeta\rgamma\n\nend\r");
  }
}

TEST(FtpInterop, FtpdUnderOpenbsdInetd) {
  REQUIRE_PROGRAM("/usr/sbin/inetd");
  TempDir dir;
  const std::string root = dir / "root";
  mkdir(root.c_str(), 0755);
  WriteFile(root + "/file.bin", RandomBytes(3 << 20, 9));
  san::Result<std::string> hash = HashPassword("secret");
  ASSERT_TRUE(hash.ok());
  WriteFile(dir / "users", "alice:" + *hash + ":" + root + ":rw\n");
  struct passwd* me = getpwuid(geteuid());
  ASSERT_NE(me, nullptr);
  Process inetd;
  int port = 0;
  for (int attempt = 0; attempt < 5 && !port; ++attempt) {
    const int p = FreeLoopbackPort();
    WriteFile(dir / "inetd.conf", "127.0.0.1:" + std::to_string(p) + " stream tcp nowait " +
                                      me->pw_name + " " + FTPD_BIN + " ftpd --users-file " +
                                      dir / "users" + " --xferlog " + dir / "xferlog" + "\n");
    inetd.Stop();
    ASSERT_TRUE(inetd.Start({"/usr/sbin/inetd", "-d", dir / "inetd.conf"}, dir / "inetd.log"));
    if (AcceptsConnections(p)) port = p;
  }
  ASSERT_NE(port, 0) << ReadFile(dir / "inetd.log");
  const std::string url = "ftp://alice:secret@127.0.0.1:" + std::to_string(port) + "/file.bin";
  TempDir local;
  // Our client: inetd hands ftpd a plain TCP socket; AUTH SAN upgrades it, data goes over shm.
  RunResult get = RunProgram({FTP_CLIENT_BIN, "-v", url, "-o", local / "a.bin"});
  ASSERT_EQ(get.exit_code, 0) << get.err << ReadFile(dir / "inetd.log");
  EXPECT_EQ(Checksum(local / "a.bin"), Checksum(root + "/file.bin"));
  EXPECT_NE(get.err.find("--- control connection: shm"), std::string::npos) << get.err;
  EXPECT_NE(get.err.find("data path shm."), std::string::npos) << get.err;
  // lftp: no upgrade (it does not know AUTH SAN), plain TCP, same bytes.
  if (Installed("lftp")) {
    const std::string r = Lftp("-u alice,secret ftp://127.0.0.1:" + std::to_string(port),
                               "get file.bin -o " + local / "b.bin", true);
    ASSERT_EQ(r.substr(0, 3), "ok:") << r;
    EXPECT_EQ(Checksum(local / "b.bin"), Checksum(root + "/file.bin"));
  }
  EXPECT_NE(ReadFile(dir / "xferlog").find("/file.bin b _ o r alice ftp 0 * c"), std::string::npos);
}

}  // namespace
}  // namespace san::ftp::testing
