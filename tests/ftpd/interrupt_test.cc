// Ctrl-C in ftp_client (SIGINT sent to a real client mid-transfer), against our ftpd (data on
// shm) and against vsftpd (data on TCP): the transfer is aborted with ABOR, the server's replies
// are read, a partial download stays, an upload is not left looking complete on ftpd, batch mode
// exits with 130 and interactive mode comes back to its prompt (also after a Ctrl-C at the
// prompt). Every wait is bounded; the sources are sparse files of 16 GiB, so no transfer can end
// by itself before the signal.
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "ftp_test_util.h"

namespace san::ftp::testing {
namespace {

constexpr uint64_t kHuge = uint64_t{16} << 30;
constexpr uint64_t kRunning = 1 << 20;  // this much moved: the transfer is under way
constexpr int kWaitMs = 20000;

uint64_t SizeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Batch get of `url` into `local`, Ctrl-C once it runs: exit code 130, the partial file kept.
// Returns the client's stderr.
std::string InterruptedBatchGet(const std::string& url, const std::string& local) {
  Interactive client;
  EXPECT_TRUE(client.Start({FTP_CLIENT_BIN, "-v", "--timeout=10000", url, "-o", local}));
  EXPECT_TRUE(WaitForFileSize(local, kRunning, kWaitMs)) << client.err();
  EXPECT_TRUE(client.Signal(SIGINT));
  EXPECT_EQ(client.Wait(kWaitMs), 130) << client.err();
  const std::string err = client.err();
  EXPECT_NE(err.find("---> ABOR"), std::string::npos) << err;
  EXPECT_NE(err.find("RETR interrupted: aborted after"), std::string::npos) << err;
  EXPECT_NE(err.find("the partial file stays: " + local), std::string::npos) << err;
  EXPECT_GE(SizeOf(local), kRunning);
  EXPECT_LT(SizeOf(local), kHuge);
  return err;
}

// Batch put of `local` to `url`, Ctrl-C once `dir` has an entry named like `entry` of 1 MiB.
std::string InterruptedBatchPut(const std::string& local, const std::string& url,
                                const std::string& dir, const std::string& entry) {
  Interactive client;
  EXPECT_TRUE(client.Start({FTP_CLIENT_BIN, "-v", "--timeout=10000", "--put", local, url}));
  EXPECT_TRUE(WaitForEntrySize(dir, entry, kRunning, kWaitMs)) << client.err();
  EXPECT_TRUE(client.Signal(SIGINT));
  EXPECT_EQ(client.Wait(kWaitMs), 130) << client.err();
  const std::string err = client.err();
  EXPECT_NE(err.find("---> ABOR"), std::string::npos) << err;
  EXPECT_NE(err.find("STOR interrupted: aborted after"), std::string::npos) << err;
  return err;
}

// Interactive: log in, Ctrl-C at the prompt (a new prompt, not the end), a get interrupted by
// Ctrl-C (replies shown, the partial file kept), and the session goes on (pwd, bye).
std::string InterruptedInteractiveGet(int port, const std::string& login, const std::string& remote,
                                      const std::string& local) {
  Interactive client;
  EXPECT_TRUE(client.Start({FTP_CLIENT_BIN, "--timeout=10000", "127.0.0.1", std::to_string(port)}));
  EXPECT_TRUE(client.Write(login + "\n"));
  EXPECT_TRUE(client.WaitForOutput("Using binary mode", kWaitMs)) << client.out();
  EXPECT_TRUE(client.Signal(SIGINT));  // at the prompt
  EXPECT_TRUE(client.Write("pwd\n"));
  EXPECT_TRUE(client.WaitForOutput("257 ", kWaitMs)) << client.out() << client.err();
  EXPECT_TRUE(client.Write("get " + remote + " " + local + "\n"));
  EXPECT_TRUE(WaitForFileSize(local, kRunning, kWaitMs)) << client.out();
  EXPECT_TRUE(client.Signal(SIGINT));
  EXPECT_TRUE(client.WaitForOutput("partial file kept", kWaitMs)) << client.out() << client.err();
  EXPECT_TRUE(client.Write("pwd\nbye\n"));
  client.CloseInput();
  EXPECT_NE(client.Wait(kWaitMs), -1) << client.out();  // it left by itself, after bye
  const std::string out = client.out();
  EXPECT_NE(out.find("Transfer aborted: "), std::string::npos) << out;
  EXPECT_NE(out.find("local: " + local + ": partial file kept ("), std::string::npos) << out;
  // pwd answered before and after the abort, and bye said goodbye.
  const size_t first = out.find("257 ");
  EXPECT_NE(first, std::string::npos) << out;
  EXPECT_NE(out.find("257 ", out.find("Transfer aborted")), std::string::npos) << out;
  EXPECT_NE(out.find("221"), std::string::npos) << out;
  EXPECT_GE(SizeOf(local), kRunning);
  EXPECT_LT(SizeOf(local), kHuge);
  return out;
}

TEST(FtpInterrupt, CtrlCAgainstFtpd) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(MakeSparseFile(s.root() + "/huge", kHuge));
  TempDir local;
  {
    SCOPED_TRACE("batch get");
    const std::string err = InterruptedBatchGet(s.url("huge"), local / "huge");
    EXPECT_NE(err.find("(server: 426 "), std::string::npos) << err;
    EXPECT_NE(err.find(" bytes over shm ("), std::string::npos) << err;
  }
  {
    SCOPED_TRACE("batch put");
    ASSERT_TRUE(MakeSparseFile(local / "up.bin", kHuge));
    const std::string err =
        InterruptedBatchPut(local / "up.bin", s.url("up.bin"), s.root(), ".up.bin.part-");
    // ftpd saw the ABOR: 426 for STOR, 226 for ABOR, and the temporary file is gone.
    EXPECT_NE(err.find("(server: 426 Transfer aborted.; 226 ABOR successful.)"), std::string::npos)
        << err;
    EXPECT_FALSE(Exists(s.root() + "/up.bin"));
    EXPECT_FALSE(WaitForEntrySize(s.root(), ".part-", 0, 0));
  }
  {
    SCOPED_TRACE("interactive get");
    const std::string out =
        InterruptedInteractiveGet(s.port(), "user alice secret", "huge", local / "huge2");
    EXPECT_NE(out.find("426 "), std::string::npos) << out;
  }
  const std::string log = ReadFile(s.xferlog());
  EXPECT_NE(log.find("/huge b _ o r alice ftp 0 * i"), std::string::npos) << log;
  EXPECT_NE(log.find("/up.bin b _ i r alice ftp 0 * i"), std::string::npos) << log;
  EXPECT_EQ(log.find(" c\n"), std::string::npos) << log;  // nothing logged as complete
}

TEST(FtpInterrupt, CtrlCAgainstVsftpd) {
  VsftpdServer vsftpd;
  if (!vsftpd.skip_reason().empty()) GTEST_SKIP() << vsftpd.skip_reason();
  ASSERT_TRUE(vsftpd.ok()) << vsftpd.log();
  ASSERT_TRUE(MakeSparseFile(vsftpd.root() + "/huge", kHuge));
  chmod((vsftpd.root() + "/huge").c_str(), 0644);
  TempDir local;
  {
    SCOPED_TRACE("batch get");
    const std::string err = InterruptedBatchGet(vsftpd.base_url() + "huge", local / "huge");
    // vsftpd does not read the control connection during a transfer: it learns of the abort from
    // the reset data connection (426), then answers the ABOR (225).
    EXPECT_NE(err.find("(server: 426 "), std::string::npos) << err;
    EXPECT_NE(err.find(" bytes over tcp"), std::string::npos) << err;
  }
  {
    SCOPED_TRACE("batch put");
    ASSERT_TRUE(MakeSparseFile(local / "up.bin", kHuge));
    const std::string err = InterruptedBatchPut(local / "up.bin", vsftpd.base_url() + "incoming/",
                                                vsftpd.root() + "/incoming", "up.bin");
    EXPECT_NE(err.find("(server: 4"), std::string::npos) << err;  // not a 226: the reset shows
  }
  {
    SCOPED_TRACE("interactive get");
    InterruptedInteractiveGet(vsftpd.port(), "user anonymous x", "huge", local / "huge2");
  }
}

// On a terminal (libedit's readline), Ctrl-C at the prompt is the terminal's: the line discipline
// turns ^C into SIGINT. The client must give a new prompt and answer the next command.
TEST(FtpInterrupt, CtrlCAtATerminalPromptGivesANewPrompt) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  int master = -1;
  const std::string port = std::to_string(s.port());
  fflush(nullptr);
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    execl(FTP_CLIENT_BIN, "ftp_client", "--timeout=10000", "127.0.0.1", port.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string screen;
  // Reads the terminal until `text` appears after `from` (bounded).
  auto wait_for = [&](const std::string& text, size_t from) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
    while (screen.find(text, from) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{master, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(master, buf, sizeof buf);
      if (n <= 0) return false;
      screen.append(buf, static_cast<size_t>(n));
    }
    return true;
  };
  auto type = [&](const std::string& keys) {
    return write(master, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size());
  };
  EXPECT_TRUE(wait_for("ftp> ", 0)) << screen;
  EXPECT_TRUE(type("user alice secret\r"));
  EXPECT_TRUE(wait_for("Using binary mode", 0)) << screen;
  EXPECT_TRUE(wait_for("ftp> ", screen.find("Using binary mode"))) << screen;
  // libedit prints the prompt before it switches the terminal to its editing mode (ICANON off);
  // a ^C in between would arrive before readline's read() began and wait for the next key. A
  // person cannot type that fast; the test waits for the editing mode.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  termios mode{};
  while (tcgetattr(master, &mode) == 0 && (mode.c_lflag & ICANON) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_FALSE(mode.c_lflag & ICANON) << "readline never took the terminal";
  const size_t before = screen.size();
  EXPECT_TRUE(type("\x03"));                         // ^C: SIGINT from the terminal
  EXPECT_TRUE(wait_for("ftp> ", before)) << screen;  // a new prompt
  EXPECT_TRUE(type("pwd\r"));
  EXPECT_TRUE(wait_for("257 ", before)) << screen;  // and the next command is answered
  EXPECT_TRUE(type("bye\r"));
  EXPECT_TRUE(wait_for("221 ", before)) << screen;
  int status = 0;
  for (int i = 0; i < kWaitMs / 10 && waitpid(pid, &status, WNOHANG) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (waitpid(pid, &status, WNOHANG) == 0) {  // still there: fail, and do not leave it running
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    ADD_FAILURE() << "ftp_client did not exit after bye: " << screen;
  }
  close(master);
}

}  // namespace
}  // namespace san::ftp::testing
