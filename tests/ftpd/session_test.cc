// ftpd under hand-driven and hostile clients: each test starts a real ftpd -D (ftp_test_util.h)
// and talks to it over a kernel TCP control connection, asserting reply codes, that nothing
// escapes the root, that partial uploads never look complete, and that the server survives (a
// fresh session still works afterwards).
#include <fcntl.h>
#include <pwd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ftp_test_util.h"

namespace san::ftp::testing {
namespace {

// A new session logs in: the server is alive and serving.
void ExpectServerAlive(const FtpdServer& s) {
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  EXPECT_EQ(c.Login(), 230);
  EXPECT_EQ(c.Cmd("NOOP"), 200);
}

// The code of the next reply: for pipelined commands and replies that come unasked.
int NextCode(RawClient& c) {
  c.Reply();
  return c.code();
}

// Runs a data command (RETR, LIST, NLST, MLSD) on a fresh passive connection: what came on it
// ("" if the command was refused), and the final reply code in *final_code.
std::string Fetch(RawClient& c, const std::string& command, int* final_code) {
  const int data = c.PassiveData();
  if (data < 0) return "<no data connection>";
  if (c.Cmd(command) != 150) {
    close(data);
    *final_code = c.code();
    return "";
  }
  std::string got = ReadAll(data);
  *final_code = NextCode(c);
  return got;
}

TEST(FtpSession, LoginRequiredAndFailedLoginsEndTheConnection) {
  FtpdServer s({"--max-login-failures", "3"});
  ASSERT_TRUE(s.ok()) << s.log();
  RawClient c(s.port());
  EXPECT_EQ(NextCode(c), 220);
  EXPECT_EQ(c.Cmd("LIST"), 530);
  EXPECT_EQ(c.Cmd("RETR x"), 530);
  EXPECT_EQ(c.Cmd("PASS x"), 503);  // no USER yet
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(c.Cmd("USER alice"), 331);
    EXPECT_EQ(c.Cmd("PASS wrong"), 530);
  }
  EXPECT_EQ(c.Cmd("USER alice"), 331);
  EXPECT_EQ(c.Cmd("PASS wrong"), 421);
  EXPECT_TRUE(c.ClosedByPeer());
  ExpectServerAlive(s);
}

TEST(FtpSession, AnonymousIsOffByDefault) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  EXPECT_EQ(c.Login("anonymous", "me@example.org"), 530);
  EXPECT_EQ(c.Cmd("USER ftp"), 331);
  EXPECT_EQ(c.Cmd("PASS x"), 530);
}

TEST(FtpSession, AnonymousWhenEnabledIsReadOnly) {
  TempDir anon;
  WriteFile(anon / "pub.txt", "public\n");
  FtpdServer s({"--anonymous", "1", "--anon-root", anon.path()});
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_EQ(c.Login("anonymous", "me@example.org"), 230);
  EXPECT_EQ(c.Cmd("TYPE I"), 200);
  int code = 0;
  EXPECT_EQ(Fetch(c, "RETR pub.txt", &code), "public\n");
  EXPECT_EQ(code, 226);
  EXPECT_EQ(c.Cmd("STOR new.txt"), 550);
  EXPECT_EQ(c.Cmd("DELE pub.txt"), 550);
  EXPECT_EQ(c.Cmd("MKD d"), 550);
  EXPECT_EQ(c.Cmd("RNFR pub.txt"), 550);
  EXPECT_EQ(c.Cmd("SITE CHMOD 777 pub.txt"), 550);
  EXPECT_TRUE(Exists(anon / "pub.txt"));
  EXPECT_FALSE(Exists(anon / "new.txt"));
}

TEST(FtpSession, ReadOnlyAccountCannotWrite) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  WriteFile(s.root() + "/f", "x");
  RawClient c(s.port());
  ASSERT_EQ(c.Login("bob"), 230);
  EXPECT_EQ(c.Cmd("STOR g"), 550);
  EXPECT_EQ(c.Cmd("APPE f"), 550);
  EXPECT_EQ(c.Cmd("DELE f"), 550);
  EXPECT_TRUE(Exists(s.root() + "/f"));
}

TEST(FtpSession, OverlongLinesNulAndGarbageGetRepliesAndTheSessionSurvives) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  EXPECT_EQ(c.Cmd(std::string(100000, 'A')), 500);
  EXPECT_EQ(c.Cmd("NOOP"), 200);
  EXPECT_EQ(c.Cmd(std::string("NO\0OP", 5)), 500);
  EXPECT_EQ(c.Cmd("\x01\x02\x03"), 500);
  EXPECT_EQ(c.Cmd("XYZW"), 502);
  EXPECT_EQ(c.Cmd("TYPE Q"), 504);
  EXPECT_EQ(c.Cmd("MODE B"), 504);
  EXPECT_EQ(c.Cmd("STRU R"), 504);
  EXPECT_EQ(c.Cmd("RNTO x"), 503);
  EXPECT_EQ(c.Cmd("CWD"), 501);
  // Pipelined: every command in one segment gets its reply, in order.
  ASSERT_TRUE(c.Send("NOOP\r\nBOGU\r\n\r\nSYST\r\nPWD\r\n"));
  EXPECT_EQ(NextCode(c), 200);
  EXPECT_EQ(NextCode(c), 502);
  EXPECT_EQ(NextCode(c), 500);
  EXPECT_EQ(NextCode(c), 215);
  EXPECT_NE(c.Reply().find("\"/\""), std::string::npos);
  EXPECT_EQ(c.code(), 257);
  // A line with no end at all, past the limit: refused once, connection still usable.
  ASSERT_TRUE(c.Send(std::string(20000, 'B')));
  EXPECT_EQ(NextCode(c), 500);
  EXPECT_EQ(c.Cmd("\r\nNOOP"), 200);  // ends the over-long line, then a normal command
  ExpectServerAlive(s);
}

TEST(FtpSession, PathsCannotEscapeTheRoot) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  TempDir outside;
  WriteFile(outside / "secret", "SECRET");
  ASSERT_EQ(symlink(outside.path().c_str(), (s.root() + "/out").c_str()), 0);
  ASSERT_EQ(symlink("../../../../../../../../etc", (s.root() + "/etc_up").c_str()), 0);
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  EXPECT_EQ(c.Cmd("CWD ../../../.."), 250);
  EXPECT_EQ(c.Cmd("PWD"), 257);
  EXPECT_EQ(c.Cmd("SIZE ../../../../etc/passwd"), 550);
  EXPECT_EQ(c.Cmd("SIZE /etc/passwd"), 550);
  EXPECT_EQ(c.Cmd("SIZE out/secret"), 550);
  EXPECT_EQ(c.Cmd("SIZE etc_up/passwd"), 550);
  EXPECT_EQ(c.Cmd("CWD out"), 550);
  int code = 0;
  EXPECT_EQ(Fetch(c, "RETR out/secret", &code), "");
  EXPECT_EQ(code, 550);
  EXPECT_EQ(c.Cmd("MKD out/made"), 550);
  EXPECT_EQ(c.Cmd("RNFR out/secret"), 550);
  EXPECT_EQ(c.Cmd("DELE out/secret"), 550);
  EXPECT_EQ(c.Cmd("SITE CHMOD 777 out/secret"), 550);
  EXPECT_EQ(ReadFile(outside / "secret"), "SECRET");
  EXPECT_FALSE(Exists(outside / "made"));
  // Listing the link shows the link; listing through it shows nothing of the outside.
  EXPECT_EQ(Fetch(c, "LIST out/", &code), "");
  EXPECT_EQ(code, 550);
}

TEST(FtpSession, BouncePortsAreRefused) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  EXPECT_EQ(c.Cmd("PORT 10,1,2,3,200,1"), 504);      // another host
  EXPECT_EQ(c.Cmd("PORT 127,0,0,1,0,25"), 504);      // privileged port
  EXPECT_EQ(c.Cmd("EPRT |1|192.0.2.1|5000|"), 504);
  EXPECT_EQ(c.Cmd("EPRT |1|127.0.0.1|80|"), 504);
  EXPECT_EQ(c.Cmd("PORT 1,2,3"), 501);
  EXPECT_EQ(c.Cmd("PORT 999,0,0,1,20,1"), 501);
  EXPECT_EQ(c.Cmd("EPRT |9|x|1|"), 522);
  EXPECT_EQ(c.Cmd("EPRT garbage"), 522);
  // Without an accepted PORT, a transfer has no data connection to use.
  EXPECT_EQ(c.Cmd("LIST"), 425);
  EXPECT_EQ(c.Cmd("EPSV ALL"), 200);
  EXPECT_EQ(c.Cmd("PORT 127,0,0,1,200,1"), 501);
  EXPECT_EQ(c.Cmd("PASV"), 501);
}

TEST(FtpSession, RestOffsets) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  WriteFile(s.root() + "/f", "0123456789");
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  EXPECT_EQ(c.Cmd("TYPE I"), 200);
  EXPECT_EQ(c.Cmd("REST abc"), 501);
  EXPECT_EQ(c.Cmd("REST -1"), 501);
  EXPECT_EQ(c.Cmd("REST 99999999999999999999"), 501);
  EXPECT_EQ(c.Cmd("REST 4"), 350);
  int code = 0;
  EXPECT_EQ(Fetch(c, "RETR f", &code), "456789");
  EXPECT_EQ(code, 226);
  EXPECT_EQ(c.Cmd("REST 11"), 350);
  EXPECT_EQ(Fetch(c, "RETR f", &code), "");
  EXPECT_EQ(code, 554);
  EXPECT_EQ(c.Cmd("REST 10"), 350);  // exactly the end: nothing left, not an error
  EXPECT_EQ(Fetch(c, "RETR f", &code), "");
  EXPECT_EQ(code, 226);
  ExpectServerAlive(s);
}

TEST(FtpSession, FileCommands) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  WriteFile(s.root() + "/a.txt", "line1\nline2\n");
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  EXPECT_EQ(c.Cmd("MKD d"), 257);
  EXPECT_EQ(c.Cmd("MKD d"), 550);
  EXPECT_EQ(c.Cmd("CWD d"), 250);
  EXPECT_EQ(c.Cmd("PWD"), 257);
  EXPECT_EQ(c.Cmd("CDUP"), 250);
  EXPECT_EQ(c.Cmd("RNFR a.txt"), 350);
  EXPECT_EQ(c.Cmd("RNTO d/b.txt"), 250);
  EXPECT_TRUE(Exists(s.root() + "/d/b.txt"));
  EXPECT_EQ(c.Cmd("RMD d"), 550);  // not empty
  EXPECT_EQ(c.Cmd("SIZE d/b.txt"), 213);
  EXPECT_EQ(c.Cmd("SIZE d"), 550);
  EXPECT_EQ(c.Cmd("MDTM d/b.txt"), 213);
  EXPECT_EQ(c.Cmd("MLST d/b.txt"), 250);
  EXPECT_EQ(c.Cmd("SITE CHMOD 600 d/b.txt"), 200);
  struct stat st {};
  ASSERT_EQ(stat((s.root() + "/d/b.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(c.Cmd("SITE CHMOD 9z9 d/b.txt"), 501);
  EXPECT_EQ(c.Cmd("SITE HELP"), 214);
  EXPECT_EQ(c.Cmd("SITE EXEC rm"), 504);
  EXPECT_EQ(c.Cmd("FEAT"), 211);
  EXPECT_EQ(c.Cmd("OPTS UTF8 ON"), 200);
  EXPECT_EQ(c.Cmd("HELP"), 214);
  EXPECT_EQ(c.Cmd("STAT"), 211);
  EXPECT_EQ(c.Cmd("STAT d"), 213);
  EXPECT_EQ(c.Cmd("SYST"), 215);
  // TYPE A turns LF into CRLF on the wire.
  EXPECT_EQ(c.Cmd("TYPE A"), 200);
  int code = 0;
  EXPECT_EQ(Fetch(c, "RETR d/b.txt", &code), "line1\r\nline2\r\n");
  EXPECT_EQ(code, 226);
  // MLSD and NLST.
  EXPECT_NE(Fetch(c, "MLSD d", &code).find("type=file;size=12;"), std::string::npos);
  EXPECT_EQ(code, 226);
  EXPECT_EQ(Fetch(c, "NLST d", &code), "b.txt\r\n");
  EXPECT_EQ(code, 226);
  EXPECT_EQ(Fetch(c, "NLST d/*.t?t", &code), "d/b.txt\r\n");  // wildcards, as mget sends them
  EXPECT_EQ(code, 226);
  EXPECT_EQ(Fetch(c, "NLST d/*.none", &code), "");
  EXPECT_EQ(code, 550);
  EXPECT_EQ(c.Cmd("DELE d/b.txt"), 250);
  EXPECT_EQ(c.Cmd("RMD d"), 250);
  EXPECT_EQ(c.Cmd("RMD /"), 550);
  EXPECT_EQ(c.Cmd("QUIT"), 221);
  EXPECT_TRUE(c.ClosedByPeer());
}

// Sends `bytes` as the data of `command` (STOR/APPE/STOU); returns the final reply code.
int Upload(RawClient& c, const std::string& command, const std::string& bytes, std::string* reply150) {
  const int data = c.PassiveData();
  if (data < 0) return 0;
  if (!c.Send(command + "\r\n")) return 0;
  *reply150 = c.Reply();
  if (c.code() != 150) {
    close(data);
    return c.code();
  }
  send(data, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  close(data);
  return NextCode(c);
}

TEST(FtpSession, StouAppeAndResumedStor) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  EXPECT_EQ(c.Cmd("TYPE I"), 200);
  std::string r150;
  EXPECT_EQ(Upload(c, "STOR f", "hello", &r150), 226);
  EXPECT_EQ(Upload(c, "APPE f", " world", &r150), 226);
  EXPECT_EQ(ReadFile(s.root() + "/f"), "hello world");
  EXPECT_EQ(Upload(c, "STOU f", "unique", &r150), 226);
  EXPECT_EQ(r150, "FILE: f.1");
  EXPECT_EQ(ReadFile(s.root() + "/f.1"), "unique");
  // REST + STOR overwrites from the offset and cuts what lay beyond.
  EXPECT_EQ(c.Cmd("REST 6"), 350);
  EXPECT_EQ(Upload(c, "STOR f", "W", &r150), 226);
  EXPECT_EQ(ReadFile(s.root() + "/f"), "hello W");
  EXPECT_EQ(c.Cmd("REST 100"), 350);
  EXPECT_EQ(Upload(c, "STOR f", "x", &r150), 554);
  EXPECT_EQ(c.Cmd("MKD dir"), 257);
  EXPECT_EQ(Upload(c, "STOR dir", "x", &r150), 550);
  // TYPE A upload: CRLF becomes LF on disk.
  EXPECT_EQ(c.Cmd("TYPE A"), 200);
  EXPECT_EQ(Upload(c, "STOR t.txt", "a\r\nb\r\n", &r150), 226);
  EXPECT_EQ(ReadFile(s.root() + "/t.txt"), "a\nb\n");
}

TEST(FtpSession, AborMidTransferRepliesAndSessionContinues) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  {  // 256 MiB of zeros (sparse): far more than the socket buffers hold.
    const int fd = open((s.root() + "/huge").c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_EQ(ftruncate(fd, 256 << 20), 0);
    close(fd);
  }
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  EXPECT_EQ(c.Cmd("TYPE I"), 200);
  const int data = c.PassiveData();
  ASSERT_GE(data, 0);
  EXPECT_EQ(c.Cmd("RETR huge"), 150);
  char buf[4096];
  ASSERT_GT(recv(data, buf, sizeof buf, 0), 0);  // the transfer is running; we stop reading
  ASSERT_TRUE(c.Send("\xff\xf4\xff\xf2" "ABOR\r\n"));
  EXPECT_EQ(NextCode(c), 426);
  EXPECT_EQ(NextCode(c), 226);
  close(data);
  EXPECT_EQ(c.Cmd("NOOP"), 200);
  EXPECT_EQ(c.Cmd("ABOR"), 225);  // nothing to abort now
  EXPECT_NE(ReadFile(s.xferlog()).find("/huge b _ o r alice ftp 0 * i"), std::string::npos)
      << ReadFile(s.xferlog());
}

TEST(FtpSession, DisconnectMidStorLeavesNoCompleteLookingFile) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  {
    RawClient c(s.port());
    ASSERT_EQ(c.Login(), 230);
    EXPECT_EQ(c.Cmd("TYPE I"), 200);
    const int data = c.PassiveData();
    ASSERT_GE(data, 0);
    EXPECT_EQ(c.Cmd("STOR upload.bin"), 150);
    const std::string chunk = RandomBytes(1 << 20, 1);
    ASSERT_EQ(send(data, chunk.data(), chunk.size(), MSG_NOSIGNAL), static_cast<ssize_t>(chunk.size()));
    // The client dies: its data connection is reset, then the control connection goes.
    linger lg{1, 0};
    setsockopt(data, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(data);
  }
  // The session notices, removes its temporary file and ends; nothing named upload.bin appears.
  bool clean = false;
  for (int i = 0; i < 500 && !clean; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    clean = ReadFile(s.xferlog()).find("upload.bin") != std::string::npos;
  }
  EXPECT_TRUE(clean) << "no xferlog record of the broken upload";
  EXPECT_FALSE(Exists(s.root() + "/upload.bin"));
  EXPECT_NE(ReadFile(s.xferlog()).find("/upload.bin b _ i r alice ftp 0 * i"), std::string::npos);
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  int code = 0;
  EXPECT_EQ(Fetch(c, "NLST -a", &code), "");  // no ".upload.bin.part-*" left behind either
  EXPECT_EQ(code, 226);
}

TEST(FtpSession, AuthMechanisms) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  c.Reply();
  EXPECT_EQ(c.Cmd("AUTH TLS"), 504);
  EXPECT_EQ(c.Cmd("PBSZ 0"), 503);
  // AUTH SAN needs a quiet connection: with a command pipelined behind it, the server declines
  // rather than lose that command to the upgrade negotiation.
  ASSERT_TRUE(c.Send("AUTH SAN\r\nNOOP\r\n"));
  EXPECT_EQ(NextCode(c), 503);
  EXPECT_EQ(NextCode(c), 200);
  ASSERT_TRUE(c.Send("FEAT\r\n"));
  const std::string feat = c.Reply();
  EXPECT_EQ(c.code(), 211);
  EXPECT_NE(feat.find("AUTH SAN"), std::string::npos) << feat;
  EXPECT_NE(feat.find("REST STREAM"), std::string::npos) << feat;
}

TEST(FtpSession, RunAsDropsRootAfterLogin) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  passwd* nobody = getpwnam("nobody");
  if (!nobody) GTEST_SKIP() << "no user nobody";
  FtpdServer s({"--run-as", "nobody"});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(chown(s.root().c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  WriteFile(s.root() + "/root-only", "x");
  chmod((s.root() + "/root-only").c_str(), 0600);
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  std::string r150;
  EXPECT_EQ(Upload(c, "STOR mine", "data", &r150), 226);
  struct stat st {};
  ASSERT_EQ(stat((s.root() + "/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody->pw_uid);  // created by the session user, not root
  int code = 0;
  EXPECT_EQ(Fetch(c, "RETR root-only", &code), "");
  EXPECT_EQ(code, 550);  // the kernel's permission check applies to the session user
}

// A uid per account: alice's line names a system user, which her sessions become (and not
// --run-as's); bob, without one, gets --run-as. Run as root only.
TEST(FtpSession, AccountSystemUserOverridesRunAs) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  passwd* nobody = getpwnam("nobody");
  if (!nobody) GTEST_SKIP() << "no user nobody";
  const uid_t nobody_uid = nobody->pw_uid;
  FtpdServer s({"--run-as", "root"}, "nobody");
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(chown(s.root().c_str(), nobody_uid, nobody->pw_gid), 0);
  {
    RawClient c(s.port());
    ASSERT_EQ(c.Login("alice"), 230);
    std::string r150;
    EXPECT_EQ(Upload(c, "STOR by-alice", "a", &r150), 226);
  }
  struct stat st {};
  ASSERT_EQ(stat((s.root() + "/by-alice").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody_uid);
  // An unknown system user: the login is refused, nothing runs as the wrong user.
  FtpdServer bad({}, "no-such-user-ftpd");
  ASSERT_TRUE(bad.ok());
  RawClient c(bad.port());
  EXPECT_EQ(c.Login("alice"), 421);
}

// The pids of the daemon's children (its sessions).
std::vector<int> Children(int pid) {
  std::vector<int> out;
  std::istringstream in(ReadFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) +
                                 "/children"));
  for (int child; in >> child;) out.push_back(child);
  return out;
}

// The root directory of the daemon's only session, as the kernel sees it ("" if not exactly one).
std::string SessionRoot(const FtpdServer& s) {
  const std::vector<int> kids = Children(s.pid());
  if (kids.size() != 1) return "";
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(kids[0]) + "/root";
  const ssize_t n = readlink(link.c_str(), buf, sizeof buf - 1);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

// Run by root, a session chroots into its root after login (and before run-as drops root), on
// top of the openat2 jail; listings (native, no /bin/ls inside), transfers and the path checks
// keep working in there, and --chroot no leaves the process root alone.
TEST(FtpSession, RootSessionsAreChrootedIntoTheirRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "chroot needs root";
  passwd* nobody = getpwnam("nobody");
  TempDir outside;
  WriteFile(outside / "secret", "SECRET");
  {
    std::vector<std::string> flags;
    if (nobody) flags = {"--run-as", "nobody"};
    FtpdServer s(flags);
    ASSERT_TRUE(s.ok());
    if (nobody) {
      ASSERT_EQ(chown(s.root().c_str(), nobody->pw_uid, nobody->pw_gid), 0);
    }
    WriteFile(s.root() + "/inside.txt", "inside");
    ASSERT_EQ(symlink("/etc", (s.root() + "/etc_abs").c_str()), 0);
    ASSERT_EQ(symlink(outside.path().c_str(), (s.root() + "/out").c_str()), 0);
    RawClient c(s.port());
    ASSERT_EQ(c.Login(), 230);
    char real[PATH_MAX];
    ASSERT_NE(realpath(s.root().c_str(), real), nullptr);
    EXPECT_EQ(SessionRoot(s), real);  // the kernel's root of the session process
    c.Send("STAT\r\n");
    EXPECT_NE(c.Reply().find("Confinement: chroot + openat2"), std::string::npos);
    int code = 0;
    EXPECT_NE(Fetch(c, "LIST", &code).find("inside.txt"), std::string::npos);
    EXPECT_EQ(code, 226);
    EXPECT_EQ(Fetch(c, "RETR inside.txt", &code), "inside");
    EXPECT_EQ(code, 226);
    std::string r150;
    EXPECT_EQ(Upload(c, "STOR made.txt", "made", &r150), 226);
    EXPECT_EQ(ReadFile(s.root() + "/made.txt"), "made");
    EXPECT_EQ(Fetch(c, "RETR etc_abs/passwd", &code), "");
    EXPECT_EQ(code, 550);
    EXPECT_EQ(Fetch(c, "RETR out/secret", &code), "");
    EXPECT_EQ(code, 550);
    EXPECT_EQ(c.Cmd("SIZE ../../../../etc/passwd"), 550);
    EXPECT_EQ(c.Cmd("QUIT"), 221);
    // xferlog (opened before the chroot) still got the records.
    EXPECT_NE(ReadFile(s.xferlog()).find("made.txt"), std::string::npos);
  }
  FtpdServer plain({"--chroot", "no"});
  ASSERT_TRUE(plain.ok());
  RawClient c(plain.port());
  ASSERT_EQ(c.Login(), 230);
  EXPECT_EQ(SessionRoot(plain), "/");
  c.Send("STAT\r\n");
  EXPECT_NE(c.Reply().find("Confinement: openat2"), std::string::npos);
}

// A client that asks for AUTH SAN but does not speak the upgrade protocol: the session ends
// (bounded by sanlib's 5 s negotiation limit) and the server carries on.
TEST(FtpSession, AuthSanFromAPlainClientEndsOnlyThatSession) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  c.Reply();
  EXPECT_EQ(c.Cmd("AUTH SAN"), 234);
  ASSERT_TRUE(c.Send("NOOP\r\nNOOP\r\nNOOP\r\nNOOP\r\nNOOP\r\nNOOP\r\nNOOP\r\nNOOP\r\n"));
  EXPECT_TRUE(c.ClosedByPeer(15000));
  ExpectServerAlive(s);
}

TEST(FtpSession, IdleTimeoutCloses) {
  FtpdServer s({"--idle-timeout", "1"});
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_EQ(c.Login(), 230);
  c.Reply(5000);
  EXPECT_EQ(c.code(), 421);
  EXPECT_TRUE(c.ClosedByPeer(5000));
}

TEST(FtpSession, PerAddressLimitFromConfigFile) {
  TempDir conf;
  WriteFile(conf / "ftpd.conf", "# a comment\nmax-per-ip = 1\nbanner = hello from the config\n");
  FtpdServer s({"--config", conf / "ftpd.conf"});
  ASSERT_TRUE(s.ok());
  RawClient first(s.port());
  EXPECT_EQ(first.Reply(), "hello from the config");
  EXPECT_EQ(first.Cmd("USER alice"), 331);
  ASSERT_EQ(first.Cmd("PASS secret"), 230);
  RawClient second(s.port());
  EXPECT_EQ(NextCode(second), 421);
  EXPECT_TRUE(second.ClosedByPeer());
  EXPECT_EQ(first.Cmd("NOOP"), 200);
}

}  // namespace
}  // namespace san::ftp::testing
