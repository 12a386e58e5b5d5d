// Ctrl-C in ftp_client (SIGINT sent to a real client mid-transfer), against our ftpd (data on
// shm) and against vsftpd (data on TCP): the transfer is aborted with ABOR, the server's replies
// are read, a partial download stays, an upload is not left looking complete on ftpd, batch mode
// exits with 130 and interactive mode comes back to its prompt (also after a Ctrl-C at the
// prompt). Every wait is bounded; the sources are sparse files of 16 GiB, so no transfer can end
// by itself before the signal.
// Then Ctrl-C while an ordinary command waits for a reply that a scripted server holds back: the
// client comes back at once, skips the late reply (single-line, multi-line, after a 1xx, cut in
// the middle) before its next command, and closes the connection when it never comes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ftp_test_util.h"
#include "support/process.h"

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

// ftp_client on a pseudo-terminal (forkpty), so that libedit's readline runs and a typed ^C is
// turned into SIGINT by the line discipline, as for a person at a terminal. The destructor kills
// and reaps the client if it is still there.
class Terminal {
 public:
  explicit Terminal(int port) {
    const std::string port_arg = std::to_string(port);
    fflush(nullptr);
    pid_ = forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      signal(SIGINT, SIG_DFL);
      execl(FTP_CLIENT_BIN, "ftp_client", "--timeout=30000", "127.0.0.1", port_arg.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Terminal() {
    if (pid_ > 0) testing_support::KillAndReap(pid_, false);
    if (master_ >= 0) close(master_);
  }
  bool ok() const { return pid_ > 0; }
  const std::string& screen() const { return screen_; }
  // Reads the terminal until `text` appears at or after `from` (within timeout_ms).
  bool WaitFor(const std::string& text, size_t from, int timeout_ms = kWaitMs) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (screen_.find(text, from) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(master_, buf, sizeof buf);
      if (n <= 0) return false;
      screen_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  bool Type(const std::string& keys) {
    return write(master_, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size());
  }
  // libedit prints the prompt before it switches the terminal to its editing mode (ICANON off);
  // a ^C in between would arrive before readline's read() began and wait for the next key. A
  // person cannot type that fast; the test waits for the editing mode.
  bool WaitForEditing() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
    termios mode{};
    while (tcgetattr(master_, &mode) == 0 && (mode.c_lflag & ICANON) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return !(mode.c_lflag & ICANON);
  }
  // Whether the client ended by itself within kWaitMs.
  bool Exited() {
    if (testing_support::WaitBounded(pid_, kWaitMs) < 0) return false;
    pid_ = -1;
    return true;
  }

 private:
  int master_ = -1;
  pid_t pid_ = -1;
  std::string screen_;
};

// On a terminal (libedit's readline), Ctrl-C at the prompt is the terminal's: the line discipline
// turns ^C into SIGINT. The client must give a new prompt and answer the next command.
TEST(FtpInterrupt, CtrlCAtATerminalPromptGivesANewPrompt) {
  FtpdServer s;
  ASSERT_TRUE(s.ok());
  Terminal t(s.port());
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t.WaitFor("ftp> ", 0)) << t.screen();
  EXPECT_TRUE(t.Type("user alice secret\r"));
  EXPECT_TRUE(t.WaitFor("Using binary mode", 0)) << t.screen();
  EXPECT_TRUE(t.WaitFor("ftp> ", t.screen().find("Using binary mode"))) << t.screen();
  EXPECT_TRUE(t.WaitForEditing()) << "readline never took the terminal";
  const size_t before = t.screen().size();
  EXPECT_TRUE(t.Type("\x03"));                            // ^C: SIGINT from the terminal
  EXPECT_TRUE(t.WaitFor("ftp> ", before)) << t.screen();  // a new prompt
  EXPECT_TRUE(t.Type("pwd\r"));
  EXPECT_TRUE(t.WaitFor("257 ", before)) << t.screen();  // and the next command is answered
  EXPECT_TRUE(t.Type("bye\r"));
  EXPECT_TRUE(t.WaitFor("221 ", before)) << t.screen();
  EXPECT_TRUE(t.Exited()) << "ftp_client did not exit after bye: " << t.screen();
}

// A scripted FTP server, the peer for the reply-wait cases: a kernel TCP listener on an ephemeral
// loopback port whose one session (a thread) answers each command, in order, with a canned reply
// -- except `held_verb`, whose reply goes out in two parts: `now` at once, `later` only when the
// test calls Release() (or after kHoldMs), as a server stalled inside a command would send it.
// While it holds, it still reads the connection, to record whether the client sent anything before
// the reply it owes came (it must not, but for an ABOR). EPSV names a data listener that lets
// connections queue and never sends on them. Test-only; the destructor stops and joins the session.
class ScriptedServer {
 public:
  static constexpr int kHoldMs = 20000;

  ScriptedServer(std::string held_verb, std::string now, std::string later)
      : held_verb_(std::move(held_verb)), now_(std::move(now)), later_(std::move(later)) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listener_ < 0 || bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(listener_, 1) != 0 ||
        getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        pipe2(release_, O_CLOEXEC) != 0 || pipe2(stop_, O_CLOEXEC) != 0) {
      return;
    }
    const int control_port = ntohs(a.sin_port);
    data_listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    a.sin_port = 0;
    if (data_listener_ < 0 ||
        bind(data_listener_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        listen(data_listener_, 4) != 0 ||
        getsockname(data_listener_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    data_port_ = ntohs(a.sin_port);
    port_ = control_port;
    thread_ = std::thread([this] { Serve(); });
  }

  ~ScriptedServer() {
    if (stop_[1] >= 0) (void)!write(stop_[1], "x", 1);
    if (thread_.joinable()) thread_.join();
    for (int fd : {listener_, data_listener_, release_[0], release_[1], stop_[0], stop_[1]}) {
      if (fd >= 0) close(fd);
    }
  }

  int port() const { return port_; }
  // Sends the rest of the held reply now.
  void Release() { (void)!write(release_[1], "x", 1); }
  // Waits up to timeout_ms until a command line starting with `verb` has arrived.
  bool WaitForCommand(const std::string& verb, int timeout_ms) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      for (const std::string& c : commands()) {
        if (c.rfind(verb, 0) == 0) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  // The command lines in arrival order.
  std::vector<std::string> commands() const {
    std::lock_guard<std::mutex> lock(mu_);
    return commands_;
  }
  // Bytes from the client while a reply was held back, and whether it closed the connection then.
  std::string sent_while_held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_while_held_;
  }
  bool closed_while_held() const { return closed_while_held_; }

 private:
  std::string ReplyTo(const std::string& verb) const {
    if (verb == "USER") return "331 Password, please.\r\n";
    if (verb == "PASS") return "230 Logged in.\r\n";
    if (verb == "SYST") return "215 UNIX Type: L8\r\n";
    if (verb == "TYPE") return "200 Type set.\r\n";
    if (verb == "FEAT") return "211-Features:\r\n SIZE\r\n211 End\r\n";
    if (verb == "PWD") return "257 \"/scripted\" is the current directory.\r\n";
    if (verb == "SIZE") return "213 1234\r\n";
    if (verb == "EPSV") {
      return "229 Entering Extended Passive Mode (|||" + std::to_string(data_port_) + "|)\r\n";
    }
    if (verb == "ABOR") return "226 ABOR successful.\r\n";
    if (verb == "EPRT") return "200 EPRT command successful.\r\n";
    if (verb == "QUIT") return "221 Goodbye.\r\n";
    return "502 Not implemented here.\r\n";
  }

  // Waits for `fd` (or stop); false when stopping or after timeout_ms.
  bool WaitFor(int fd, int timeout_ms) const {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_[0], POLLIN, 0}};
    return poll(p, 2, timeout_ms) > 0 && !p[1].revents && p[0].revents;
  }

  void Send(int conn, const std::string& bytes) const {
    (void)!send(conn, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }

  // The held reply's stall: until Release (or kHoldMs, or stop), reading what the client sends
  // meanwhile into `buffer` (served after the stall, as a real server would).
  void Hold(int conn, std::string* buffer) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHoldMs);
    int watched = conn;
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      pollfd p[3] = {{release_[0], POLLIN, 0}, {stop_[0], POLLIN, 0}, {watched, POLLIN, 0}};
      if (poll(p, 3, static_cast<int>(left.count())) < 0) return;
      if (p[0].revents || p[1].revents) return;
      if (!p[2].revents) continue;
      char buf[4096];
      const ssize_t n = recv(conn, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_while_held_ = true;
        watched = -1;  // poll ignores it from now on
        continue;
      }
      buffer->append(buf, static_cast<size_t>(n));
      std::lock_guard<std::mutex> lock(mu_);
      sent_while_held_.append(buf, static_cast<size_t>(n));
    }
  }

  void Serve() {
    if (!WaitFor(listener_, 30000)) return;
    const int conn = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) return;
    Send(conn, "220 Scripted server ready.\r\n");
    std::string buffer;
    bool open = true;
    while (open) {
      size_t lf;
      while ((lf = buffer.find('\n')) == std::string::npos) {
        char buf[4096];
        if (!WaitFor(conn, 30000)) {
          close(conn);
          return;
        }
        const ssize_t n = recv(conn, buf, sizeof buf, 0);
        if (n <= 0) {
          close(conn);
          return;
        }
        buffer.append(buf, static_cast<size_t>(n));
      }
      std::string line = buffer.substr(0, lf);
      buffer.erase(0, lf + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      {
        std::lock_guard<std::mutex> lock(mu_);
        commands_.push_back(line);
      }
      std::string verb = line.substr(0, line.find(' '));
      std::transform(verb.begin(), verb.end(), verb.begin(),
                     [](unsigned char c) { return static_cast<char>(toupper(c)); });
      if (verb == held_verb_) {
        Send(conn, now_);
        Hold(conn, &buffer);
        Send(conn, later_);
        if (closed_while_held_) break;
        continue;
      }
      Send(conn, ReplyTo(verb));
      open = verb != "QUIT";
    }
    close(conn);
  }

  const std::string held_verb_, now_, later_;
  int listener_ = -1;
  int data_listener_ = -1;
  int port_ = 0;
  int data_port_ = 0;
  int release_[2] = {-1, -1};  // Release() writes: the held reply goes out
  int stop_[2] = {-1, -1};     // the destructor writes: the session ends
  std::atomic<bool> closed_while_held_{false};
  mutable std::mutex mu_;  // commands_ and sent_while_held_ (the test reads them meanwhile)
  std::vector<std::string> commands_;
  std::string sent_while_held_;
  std::thread thread_;
};

constexpr int kBackMs = 5000;  // "at once": generous against the server's 20 s stall

// An interactive client of `server` (its --timeout well past the server's stall, so only Ctrl-C
// can end the wait early) that ran `command`, which the server now stalls, and was interrupted.
void StartAndInterrupt(Interactive* client, const ScriptedServer& server,
                       const std::string& command, const std::string& held_verb,
                       int timeout_ms = 30000) {
  ASSERT_TRUE(client->Start({FTP_CLIENT_BIN, "--timeout=" + std::to_string(timeout_ms), "127.0.0.1",
                             std::to_string(server.port())}));
  ASSERT_TRUE(client->WaitForOutput("220 Scripted server ready.", kWaitMs)) << client->out();
  ASSERT_TRUE(client->Write(command + "\n"));
  ASSERT_TRUE(server.WaitForCommand(held_verb, kWaitMs)) << client->out() << client->err();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(client->Signal(SIGINT));
  ASSERT_TRUE(client->WaitForOutput("Interrupted; the reply still owed will be skipped.", kBackMs))
      << "no prompt within " << kBackMs << " ms of Ctrl-C: " << client->out() << client->err();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(kBackMs));
}

// One reply-wait case: `command` (interactive) sends `held_verb`, whose reply the server sends as
// `now` at once and `later` after its stall; every line of the late reply has `marker` in it.
struct LateReply {
  std::string command;
  std::string held_verb;
  std::string now;
  std::string later;
  std::string marker;
  std::string sent_while_held;  // what the client may send before the late reply (an ABOR)
};

// Runs the case: Ctrl-C during the stall (the prompt is back at once), then pwd, which must wait
// for the late reply and then get its own (257, never the late reply's text), then bye. Returns
// the client's stdout; *commands: what the server received.
std::string InterruptThenPwd(const LateReply& c, std::vector<std::string>* commands = nullptr) {
  ScriptedServer server(c.held_verb, c.now, c.later);
  EXPECT_GT(server.port(), 0);
  Interactive client;
  StartAndInterrupt(&client, server, c.command, c.held_verb);
  if (::testing::Test::HasFatalFailure()) return "";
  EXPECT_TRUE(client.Write("pwd\n"));
  // The client must hear the late reply before it sends PWD: whatever it sent meanwhile is
  // recorded by the server. The release comes after a moment in which a client out of step would
  // have sent its PWD.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server.Release();
  EXPECT_TRUE(client.WaitForOutput("257 ", kWaitMs)) << client.out() << client.err();
  EXPECT_TRUE(client.Write("bye\n"));
  client.CloseInput();
  EXPECT_NE(client.Wait(kWaitMs), -1) << client.out();
  EXPECT_EQ(server.sent_while_held(), c.sent_while_held)
      << "the client spoke before the owed reply came";
  const std::string out = client.out();
  const size_t interrupted = out.find("Interrupted;");
  EXPECT_NE(interrupted, std::string::npos) << out;
  // pwd printed PWD's reply, and nothing of the late one was shown as an answer.
  EXPECT_NE(out.find("257 \"/scripted\" is the current directory.", interrupted), std::string::npos)
      << out;
  EXPECT_EQ(out.find(c.marker), std::string::npos) << out;
  EXPECT_NE(out.find("221 Goodbye."), std::string::npos) << out;
  const std::vector<std::string> got = server.commands();
  EXPECT_GE(got.size(), 2u);
  if (got.size() >= 2) {
    EXPECT_EQ(got[got.size() - 2], "PWD");
  }
  if (commands) *commands = got;
  return out;
}

TEST(FtpInterruptReply, LateSingleLineReplyIsSkipped) {
  InterruptThenPwd({"cd slow", "CWD", "", "250 LATE-CWD directory changed.\r\n", "LATE-CWD", ""});
}

TEST(FtpInterruptReply, LateMultiLineReplyCutInTheMiddleIsSkipped) {
  // The first line comes before the stall, the rest after it: the client must go on with the
  // same reply, not take "251 ..." (text inside a 250 reply) for a reply of its own.
  InterruptThenPwd({"delete some-file", "DELE", "250-LATE-DELE first line\r\n",
                    "251 LATE-DELE text that looks like a reply\r\n LATE-DELE more text\r\n"
                    "250 LATE-DELE done.\r\n",
                    "LATE-DELE", ""});
}

TEST(FtpInterruptReply, LatePreliminaryAndFinalRepliesAreSkipped) {
  // A 1xx does not settle a command: the final reply after it is owed too.
  InterruptThenPwd({"mkdir new", "MKD", "",
                    "150 LATE-MKD working on it\r\n257-LATE-MKD created,\r\n"
                    "257 LATE-MKD \"/new\" is there.\r\n",
                    "LATE-MKD", ""});
}

TEST(FtpInterruptReply, TransferInterruptedBeforeItsPreliminaryReply) {
  // ls: EPSV, the data connection, then NLST, whose 150 the server holds back. Ctrl-C sends ABOR
  // without waiting and closes the data connection; NLST's 150 and 426 and ABOR's 226 are then
  // owed, and all are skipped before PWD.
  std::vector<std::string> commands;
  const std::string out =
      InterruptThenPwd({"ls", "NLST", "",
                        "150 LATE-NLST here comes the listing.\r\n"
                        "426 LATE-NLST connection closed; transfer aborted.\r\n",
                        "LATE-NLST", "ABOR\r\n"},
                       &commands);
  const auto abor = std::find(commands.begin(), commands.end(), "ABOR");
  EXPECT_NE(abor, commands.end());
  EXPECT_LT(abor - commands.begin(),
            std::find(commands.begin(), commands.end(), "PWD") - commands.begin());
  EXPECT_EQ(out.find("226 ABOR"), std::string::npos) << out;
}

TEST(FtpInterruptReply, ActiveTransferInterruptedWhileTheServerConnects) {
  // Active mode: RETR's 150 comes, but the server never connects to the client's listener. Ctrl-C
  // there: ABOR, and RETR's final reply (425) and ABOR's are skipped before PWD.
  std::vector<std::string> commands;
  InterruptThenPwd({"passive\nget f", "RETR", "150 Opening BINARY mode data connection.\r\n",
                    "425 LATE-RETR could not connect.\r\n", "LATE-RETR", "ABOR\r\n"},
                   &commands);
  EXPECT_NE(std::find(commands.begin(), commands.end(), "ABOR"), commands.end());
}

TEST(FtpInterruptReply, LoginInterruptedThenCompleted) {
  // Ctrl-C while PASS waits: the user command stops there (no SYST, no TYPE), and the next
  // command goes on in step.
  std::vector<std::string> commands;
  const std::string out = InterruptThenPwd(
      {"user someone secret", "PASS", "", "230 LATE-PASS logged in.\r\n", "LATE-PASS", ""},
      &commands);
  EXPECT_EQ(out.find("Login failed"), std::string::npos) << out;
  EXPECT_EQ(out.find("Using binary mode"), std::string::npos) << out;
  EXPECT_EQ(std::find(commands.begin(), commands.end(), "SYST"), commands.end());
}

TEST(FtpInterruptReply, OwedReplyThatNeverComesClosesTheConnection) {
  ScriptedServer server("SIZE", "", "213 LATE-SIZE 99\r\n");
  ASSERT_GT(server.port(), 0);
  Interactive client;
  // The owed reply is waited for --timeout (1.5 s), then the connection is given up.
  StartAndInterrupt(&client, server, "size big", "SIZE", 1500);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(client.Write("pwd\n"));
  EXPECT_TRUE(client.WaitForOutput("Connection closed; use open to connect again.", kWaitMs))
      << client.out() << client.err();
  ASSERT_TRUE(client.Write("pwd\nbye\n"));
  client.CloseInput();
  EXPECT_NE(client.Wait(kWaitMs), -1) << client.out();
  const std::string out = client.out();
  EXPECT_NE(out.find("ftp: reply owed to an interrupted command: Connection timed out"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Not connected."), std::string::npos) << out;  // the second pwd
  EXPECT_EQ(out.find("257 "), std::string::npos) << out;
  EXPECT_EQ(out.find("LATE-SIZE"), std::string::npos) << out;
  // The client closed the connection without a word while the reply was owed.
  for (int i = 0; i < kWaitMs / 10 && !server.closed_while_held(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(server.closed_while_held());
  EXPECT_EQ(server.sent_while_held(), "");
}

TEST(FtpInterruptReply, CtrlCTypedAtATerminalDuringAStalledReply) {
  // As a person sees it: ^C typed while cd waits gives a new prompt at once; pwd then waits for
  // the late 250 and answers with its own 257.
  ScriptedServer server("CWD", "", "250 LATE-CWD directory changed.\r\n");
  ASSERT_GT(server.port(), 0);
  Terminal t(server.port());
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t.WaitFor("ftp> ", 0)) << t.screen();
  EXPECT_TRUE(t.WaitForEditing()) << "readline never took the terminal";
  EXPECT_TRUE(t.Type("cd slow\r"));
  ASSERT_TRUE(server.WaitForCommand("CWD", kWaitMs)) << t.screen();
  // readline gave the terminal back before the command ran: ^C is the line discipline's SIGINT.
  const size_t before = t.screen().size();
  EXPECT_TRUE(t.Type("\x03"));
  EXPECT_TRUE(t.WaitFor("Interrupted; the reply still owed will be skipped.", before, kBackMs))
      << t.screen();
  const size_t interrupted = t.screen().find("Interrupted;", before);
  EXPECT_TRUE(t.WaitFor("ftp> ", interrupted, kBackMs)) << t.screen();
  EXPECT_TRUE(t.WaitForEditing());
  EXPECT_TRUE(t.Type("pwd\r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server.Release();
  EXPECT_TRUE(t.WaitFor("257 \"/scripted\"", interrupted)) << t.screen();
  EXPECT_TRUE(t.Type("bye\r"));
  EXPECT_TRUE(t.WaitFor("221 ", interrupted)) << t.screen();
  EXPECT_TRUE(t.Exited()) << t.screen();
  EXPECT_EQ(t.screen().find("LATE-CWD"), std::string::npos) << t.screen();
  EXPECT_EQ(server.sent_while_held(), "");
}

TEST(FtpInterruptReply, BatchCtrlCWhileWaitingExits130) {
  // Outside a transfer, Ctrl-C ends a batch run at once (the handler exits), whatever it waits for.
  ScriptedServer server("TYPE", "", "200 LATE-TYPE.\r\n");
  ASSERT_GT(server.port(), 0);
  TempDir local;
  Interactive client;
  ASSERT_TRUE(client.Start({FTP_CLIENT_BIN, "--timeout=30000",
                            "ftp://u:p@127.0.0.1:" + std::to_string(server.port()) + "/f", "-o",
                            local / "f"}));
  ASSERT_TRUE(server.WaitForCommand("TYPE", kWaitMs)) << client.err();
  ASSERT_TRUE(client.Signal(SIGINT));
  EXPECT_EQ(client.Wait(kBackMs), 130) << client.err();
}

TEST(FtpInterruptReply, BatchCtrlCBeforeTheTransferBeganExits130) {
  // Inside the transfer, before RETR's 150: the wait ends (it would last 20 s), exit 130.
  ScriptedServer server("RETR", "", "150 LATE-RETR.\r\n426 LATE-RETR.\r\n");
  ASSERT_GT(server.port(), 0);
  TempDir local;
  Interactive client;
  ASSERT_TRUE(client.Start({FTP_CLIENT_BIN, "-v", "--timeout=30000",
                            "ftp://u:p@127.0.0.1:" + std::to_string(server.port()) + "/f", "-o",
                            local / "f"}));
  ASSERT_TRUE(server.WaitForCommand("RETR", kWaitMs)) << client.err();
  ASSERT_TRUE(client.Signal(SIGINT));
  EXPECT_EQ(client.Wait(kBackMs), 130) << client.err();
  EXPECT_NE(client.err().find("RETR interrupted waiting for the server's reply"), std::string::npos)
      << client.err();
}

}  // namespace
}  // namespace san::ftp::testing
