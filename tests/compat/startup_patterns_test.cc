// The server start-up pattern suite (issue 17): the ways real servers start -- listen then
// daemonise, prefork with the creator exiting or turning client, SO_REUSEPORT groups, a listener
// passed over SCM_RIGHTS, systemd socket activation, several acceptors at once, a re-exec keeping
// the listener -- each a small C echo server (startup/*.c, plain POSIX sockets) run unmodified
// under sanrun, and real programs in their default start-up (nginx `daemon on`, redis
// `--daemonize yes`, memcached `-d -u nobody`, iperf3 `-s -D`, socat `fork`, vsftpd
// `background=YES`). Each case runs once with a SAN client (the C client or curl /
// redis-cli under sanrun) and once with a plain one, against a fresh server, and requires:
//   - every byte echoed intact, no reset or refusal, nothing hung (every wait is bounded);
//   - the mode at the end of each exchange: a SAN client's connection is shm on both ends, a plain
//     client's is kernel TCP on the server's end (the ends report it: the client line, the
//     server's DIR/served record, or SAN_REPORT for the real programs).
// Every process a case starts is stopped at its end, daemons included (startup/harness.h).
// ctest runs it under sanrun's default set-up (late) and again with SAN_SETUP=eager ("eager.").
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "compat/real_programs.h"
#include "compat/startup/harness.h"

#ifndef SAN_SANRUN
#error "SAN_SANRUN (the sanrun binary) must be defined by the build"
#endif
#ifndef SAN_TEST_PROGRAMS
#error "SAN_TEST_PROGRAMS (tests/compat/programs) must be defined by the build"
#endif
#ifndef SAN_STARTUP_BIN
#error "SAN_STARTUP_BIN (the directory of the startup_* programs) must be defined by the build"
#endif

namespace san::testing_support {
namespace {

namespace fs = std::filesystem;

constexpr int kConnections = 4;  // per client run, all at once
// What an exchange echoes at least: 64 KiB in chunks, then 50 pings of 32 bytes (exchange.h).
constexpr unsigned long kExchangeBytes = 64 * 1024 + 50 * 32;

enum class ClientKind { kSan, kPlain };

const char* KindName(ClientKind kind) { return kind == ClientKind::kSan ? "SAN" : "plain"; }

// Case names of a suite over ClientKind: "San<what>" and "Plain<what>".
auto NameByClientKind(const char* what) {
  return [what](const ::testing::TestParamInfo<ClientKind>& info) {
    return std::string(info.param == ClientKind::kSan ? "San" : "Plain") + what;
  };
}

// The base of every case: a private directory (logs, pid files, SAN_REPORT), a free port, the
// programs started, and the clean-up of all of them.
class StartupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sanlib-startup-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);  // nginx workers drop privileges and write their SAN_REPORT here
    report_ = dir_ + "/report";
    std::ofstream(report_).flush();
    chmod(report_.c_str(), 0666);
    reaper_ = std::make_unique<Reaper>(dir_);
    port_ = QuietPort();
    ASSERT_NE(port_, 0) << "no free loopback port";
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << Context();
    programs_.clear();  // each Program kills its process group
    reaper_.reset();    // then what left it
    fs::remove_all(dir_);
  }

  // {port} {dir} {sanrun} and {bin} (the startup_ programs' path prefix) replaced in each word.
  std::vector<std::string> Expand(std::vector<std::string> argv) const {
    const std::pair<std::string, std::string> subs[] = {
        {"{port}", std::to_string(port_)},
        {"{dir}", dir_},
        {"{sanrun}", SAN_SANRUN},
        {"{bin}", std::string(SAN_STARTUP_BIN) + "/startup_"}};
    for (std::string& word : argv) {
      for (const auto& [from, to] : subs) {
        for (size_t at; (at = word.find(from)) != std::string::npos;)
          word.replace(at, from.size(), to);
      }
    }
    return argv;
  }

  // `env`: variables beside SAN_REPORT.
  Program& Start(const std::vector<std::string>& argv, bool under_sanrun, const std::string& name,
                 std::map<std::string, std::string> env = {}) {
    env["SAN_REPORT"] = report_;
    programs_.push_back(std::make_unique<Program>(RealProgram(
        Expand(argv), under_sanrun ? SAN_SANRUN : "", env, dir_ + "/" + name + ".log")));
    logs_.push_back(name);
    return *programs_.back();
  }

  std::string Log(const std::string& name) const { return ReadAll(dir_ + "/" + name + ".log"); }
  std::string Served() const { return ReadAll(dir_ + "/served"); }

  // Every log of the case, for a failure.
  std::string Context() const {
    std::string s = "\n==== context (" + dir_ + ", port " + std::to_string(port_) + ")\n";
    for (const std::string& name : logs_) s += "---- " + name + ".log\n" + Tail(Log(name));
    s += "---- served (the servers' records)\n" + Tail(Served(), 2500);
    s += "---- SAN_REPORT\n" + Tail(ReadAll(report_));
    return s;
  }

  // Checks the exchanges one client reported (`who`), and, if the server keeps DIR/served, the
  // server's end of each of them.
  void CheckExchanges(const std::vector<Record>& conns, ClientKind kind, const std::string& who,
                      size_t expected, bool server_records) {
    EXPECT_EQ(conns.size(), expected) << who << ": connections reported";
    // The server writes its record before it closes, so it is there by the client's EOF; one
    // shared grace period all the same, not one per connection.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    for (const Record& c : conns) {
      const std::string id = who + " conn " + c["conn"] + " (port " + c["port"] + ")";
      EXPECT_EQ(c["result"], "ok") << id << " failed in " << c["step"] << ": " << c["error"]
                                   << " after " << c["bytes"] << " bytes echoed";
      if (c["result"] == "ok") {
        EXPECT_GE(std::stoul(c["bytes"]), kExchangeBytes) << id;
      }
      if (kind == ClientKind::kSan) {
        EXPECT_EQ(c["mode"], "shm")
            << id << ": client end not accelerated at the end; fallback: " << c["fallback"];
      } else {
        EXPECT_EQ(c["mode"], "plain") << id;
      }
      if (!server_records || c["port"] == "0" || c["port"].empty()) continue;
      Record served;
      const bool found = WaitFor(
          [&] {
            for (const Record& r : RecordsOf(Served(), "served ")) {
              if (r["peer_port"] == c["port"]) served = r;
            }
            return !served.text.empty();
          },
          static_cast<int>(
              std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                       deadline - std::chrono::steady_clock::now())
                                       .count())));
      if (!found) {  // a connection reset before any accept has no server end
        EXPECT_NE(c["result"], "ok") << id << ": the server logged no connection from this port";
        continue;
      }
      EXPECT_EQ(served["result"], "eof") << id << ": server end: " << served.text;
      if (kind == ClientKind::kSan) {
        EXPECT_EQ(served["mode"], "shm")
            << id << ": server end " << served["mode"]
            << (served["mode"] == "untracked" ? " (a kernel socket sanlib does not know)" : "")
            << "; fallback: " << served["fallback"];
      } else {  // TCP: a fallen-back SAN socket, or a kernel socket sanlib does not track
        EXPECT_TRUE(served["mode"] == "tcp" || served["mode"] == "untracked")
            << id << ": server end mode " << served["mode"] << "; fallback: " << served["fallback"];
      }
    }
  }

  // Records of `text` of exchanges: lines "<prefix>conn=...".
  static std::vector<Record> Exchanges(const std::string& text, const std::string& prefix) {
    std::vector<Record> out;
    for (Record& r : RecordsOf(text, prefix)) {
      if (!r["conn"].empty()) out.push_back(std::move(r));
    }
    return out;
  }

  std::string dir_, report_;
  uint16_t port_ = 0;
  std::vector<std::unique_ptr<Program>> programs_;
  std::vector<std::string> logs_;
  std::unique_ptr<Reaper> reaper_;
};

// ---------------------------------------------------------------------------------------------
// The C pattern servers.

struct Pattern {
  const char* name;
  std::vector<std::string> argv;  // {port} {dir} {bin} {sanrun} are substituted
  bool launcher_exits = false;    // the process the test starts exits by design (daemonises)
  bool under_sanrun = true;     // started under sanrun (else argv brings sanrun where it wants it)
  int listeners = 1;            // sockets listening on the port once the server is up
  bool creator_client = false;  // the creator runs two exchanges itself ("creator conn=" lines)
  bool server_records = true;   // a startup_ server: DIR/served records its end
};

const std::vector<Pattern>& Patterns() {
  static const std::vector<Pattern> patterns = {
      // (a) listen, fork, the parent exits; and the double fork with setsid; and a parent that
      // exits while the first clients are connected.
      {.name = "DaemonFork",
       .argv = {"{bin}daemon", "{port}", "{dir}", "single"},
       .launcher_exits = true},
      {.name = "DaemonDoubleForkSetsid",
       .argv = {"{bin}daemon", "{port}", "{dir}", "double"},
       .launcher_exits = true},
      {.name = "DaemonParentExitsWhileClientsConnect",
       .argv = {"{bin}daemon", "{port}", "{dir}", "single", "150"}},
      // (b) prefork, the creator exits; (c) prefork, the creator closes its copy and connects.
      {.name = "PreforkCreatorExits",
       .argv = {"{bin}prefork_exit", "{port}", "{dir}", "2"},
       .launcher_exits = true},
      {.name = "PreforkCreatorBecomesClient",
       .argv = {"{bin}prefork_client", "{port}", "{dir}", "2", "2"},
       .creator_client = true},
      // (d) two processes, each with its own SO_REUSEPORT listener.
      {.name = "ReusePortGroupOfTwo",
       .argv = {"{bin}reuseport", "{port}", "{dir}", "2"},
       .listeners = 2},
      // (e) the listener sent over SCM_RIGHTS, the creator closing its copy (and exiting).
      {.name = "PassedListenerCreatorCloses", .argv = {"{bin}pass_fd", "{port}", "{dir}", "keep"}},
      {.name = "PassedListenerCreatorExits",
       .argv = {"{bin}pass_fd", "{port}", "{dir}", "exit"},
       .launcher_exits = true},
      // (f) socket activation: a launcher under sanrun, and a plain one (as systemd is).
      {.name = "SocketActivationLauncherUnderSanrun",
       .argv = {"{bin}activate", "{port}", "{dir}", "--", "{bin}activated", "{dir}"}},
      {.name = "SocketActivationPlainLauncher",
       .argv = {"{bin}activate", "{port}", "{dir}", "--", "{sanrun}", "--", "{bin}activated",
                "{dir}"},
       .under_sanrun = false},
      // (g) several threads, and several processes, in accept() on one listener at once.
      {.name = "AcceptInFourThreads", .argv = {"{bin}accept_threads", "{port}", "{dir}", "4"}},
      {.name = "AcceptInFourProcesses", .argv = {"{bin}accept_procs", "{port}", "{dir}", "4"}},
      // (h) exec of itself keeping the listener.
      {.name = "ExecSelfKeepingListener", .argv = {"{bin}exec_self", "{port}", "{dir}"}},
      // A real program: socat forking a child per connection (the child echoes through a pipe).
      {.name = "SocatFork",
       .argv = {"socat", "TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork", "PIPE"},
       .server_records = false},
  };
  return patterns;
}

class StartupPattern : public StartupTest,
                       public ::testing::WithParamInterface<std::tuple<size_t, ClientKind>> {};

TEST_P(StartupPattern, EchoIntactNoResetAndShmAtTheEnd) {
  const Pattern& p = Patterns()[std::get<0>(GetParam())];
  const ClientKind kind = std::get<1>(GetParam());
  if (p.argv[0] == "socat" && !Installed("socat")) GTEST_SKIP() << "socat is not installed";

  Program& server = Start(p.argv, p.under_sanrun, "server");
  if (p.launcher_exits) {
    ASSERT_EQ(server.Wait(10000), 0) << p.name << ": the launcher did not exit cleanly";
  }
  ASSERT_TRUE(WaitFor([&] { return ListenerCount(port_) >= p.listeners; }, 10000))
      << p.name << ": not listening on " << port_;
  if (p.creator_client) {
    ASSERT_TRUE(
        WaitFor([&] { return Log("server").find("creator-done") != std::string::npos; }, 20000))
        << p.name << ": the creator's own exchanges did not finish";
    // The creator runs under sanrun: a SAN client, whatever the test's client is.
    if (kind == ClientKind::kSan) {
      CheckExchanges(Exchanges(Log("server"), "creator "), ClientKind::kSan, "creator (SAN client)",
                     2, p.server_records);
    }
  }

  Program& client = Start({"{bin}client", "{port}", std::to_string(kConnections)},
                          kind == ClientKind::kSan, "client");
  const int status = client.Wait(25000);
  CheckExchanges(Exchanges(Log("client"), ""), kind, std::string(KindName(kind)) + " client",
                 kConnections, p.server_records);
  EXPECT_EQ(status, 0) << "client exit status (1: an exchange failed, 3: hung, -1: killed)";
  if (p.server_records) {
    std::string errors;
    for (const Record& r : RecordsOf(Served(), "accept ")) errors += " " + r["error"];
    EXPECT_TRUE(errors.empty()) << p.name << ": accept() failed in the server:" << errors;
  }
}

std::string PatternCaseName(const ::testing::TestParamInfo<StartupPattern::ParamType>& info) {
  return std::string(Patterns()[std::get<0>(info.param)].name) +
         (std::get<1>(info.param) == ClientKind::kSan ? "_SanClient" : "_PlainClient");
}

INSTANTIATE_TEST_SUITE_P(Patterns, StartupPattern,
                         ::testing::Combine(::testing::Range<size_t>(0, Patterns().size()),
                                            ::testing::Values(ClientKind::kSan,
                                                              ClientKind::kPlain)),
                         PatternCaseName);

// ---------------------------------------------------------------------------------------------
// The first client after listen(): a server's rendezvous is open by the time the kernel listens
// (docs/sockets.md "Listen: the rendezvous first").

// The arguments that make every listen() system call of a traced program return `ms` late.
std::vector<std::string> ListenReturnsLate(int ms) {
  return {"strace",       "-f",        "-qq",
          "-o",           "/dev/null", "-e",
          "trace=listen", "-e",        "inject=listen:delay_exit=" + std::to_string(ms * 1000)};
}

// Whether strace can trace a child here with that injection (ptrace may be refused in a
// container; an old strace has no delay_exit).
bool ListenDelayWorks() {
  if (!Installed("strace")) return false;
  std::string command;
  for (const std::string& word : ListenReturnsLate(1)) command += word + " ";
  return system((command + "true >/dev/null 2>&1").c_str()) == 0;
}

TEST_F(StartupTest, FirstClientAfterListenIsShm) {
  if (!ListenDelayWorks()) GTEST_SKIP() << "strace is not installed or cannot trace here";
  // The eager set-up (the late one starts every connection on TCP by design), and no late move to
  // stand in for a client that missed the rendezvous: it would stay TCP and fail below.
  const std::map<std::string, std::string> env = {{"SAN_SETUP", "eager"},
                                                  {"SAN_UPGRADE_DELAY_US", "600000000"},
                                                  {"SAN_UPGRADE_BYTES", "0"},
                                                  {"SAN_UPGRADE_CALLS", "0"}};
  // Each listen() system call of the server returns a second late: the kernel's listener is
  // there (LISTEN in /proc/net/tcp) that long before sanlib's listen() goes on. A rendezvous
  // opened after the kernel's listen() is not there when the client below comes.
  std::vector<std::string> server = ListenReturnsLate(1000);
  for (const char* word : {SAN_SANRUN, "--", "{bin}accept_threads", "{port}", "{dir}", "1"}) {
    server.push_back(word);
  }
  Start(server, false, "server", env);
  ASSERT_TRUE(WaitFor([&] { return ListenerCount(port_) >= 1; }, 15000))
      << "not listening on " << port_;
  Program& client = Start({"{bin}client", "{port}", "1"}, true, "client", env);
  const int status = client.Wait(25000);
  CheckExchanges(Exchanges(Log("client"), ""), ClientKind::kSan, "SAN client", 1, true);
  EXPECT_EQ(status, 0) << "client exit status (1: an exchange failed, 3: hung, -1: killed)";
}

// ---------------------------------------------------------------------------------------------
// Real daemons in their default start-up.

// A file of printable bytes (redis takes it as one argument, nginx serves it).
std::string PatternText(size_t bytes) {
  std::string s(bytes, ' ');
  for (size_t i = 0; i < bytes; ++i) s[i] = static_cast<char>('!' + (i * 7 + i / 1021) % 90);
  return s;
}

// Whether the suite runs with sanrun's default set-up, late (ctest runs it twice: once so, once
// with SAN_SETUP=eager in the environment, which sanrun passes on).
bool LateSetUp() {
  const char* setup = getenv("SAN_SETUP");
  return !setup || std::string(setup) != "eager";
}

// SAN clients' connections all shm (their SAN_REPORT lines). Under the late set-up a connection
// that ends before the delay (a redis-cli command) is kernel TCP by design: all counted, either
// way.
void ExpectClientsAccelerated(const std::string& report, const std::string& prog, uint64_t count) {
  const Usage u = UsageOf(report, prog);
  if (LateSetUp()) {
    EXPECT_EQ(u.shm_connections + u.tcp_connections, count) << prog << " (SAN client)";
    return;
  }
  EXPECT_EQ(u.shm_connections, count) << prog << " (SAN client): shm connections in SAN_REPORT";
  EXPECT_EQ(u.tcp_connections, 0u) << prog << " (SAN client): TCP connections in SAN_REPORT";
}

// The server's end (its SAN_REPORT lines, written when it exits): shm for SAN clients, TCP for
// plain ones.
void ExpectServerEnd(const std::string& report, const std::string& prog, ClientKind kind,
                     uint64_t count) {
  const Usage u = UsageOf(report, prog);
  if (kind == ClientKind::kSan && LateSetUp()) {  // short connections stay TCP (above)
    EXPECT_GE(u.shm_connections + u.tcp_connections, count) << prog << " (server end, SAN clients)";
  } else if (kind == ClientKind::kSan) {
    EXPECT_GE(u.shm_connections, count) << prog << " (server end, SAN clients): shm connections";
    EXPECT_EQ(u.tcp_connections, 0u) << prog << " (server end, SAN clients): TCP connections";
  } else {
    EXPECT_GE(u.tcp_connections, count) << prog << " (server end, plain clients): TCP connections";
    EXPECT_EQ(u.shm_connections, 0u) << prog << " (server end, plain clients): shm connections";
  }
}

pid_t PidIn(const std::string& file) {
  return static_cast<pid_t>(std::atol(ReadAll(file).c_str()));
}

class NginxDaemon : public StartupTest,
                    public ::testing::WithParamInterface<std::tuple<int, ClientKind>> {};

TEST_P(NginxDaemon, CurlFetchesIntact) {
  const auto [workers, kind] = GetParam();
  if (!Installed("nginx") || !Installed("curl")) GTEST_SKIP() << "nginx or curl is not installed";
  fs::create_directories(dir_ + "/www");
  chmod((dir_ + "/www").c_str(), 0755);
  // 4 MiB fetched at a limited rate: each connection lives some 40 ms, past the delay after which
  // a connection the set-up in connect() did not equip moves to shm (sanlib/socket/
  // late_upgrade.h): under the late set-up every fetch should move. A short delay, so that every
  // fetch outlives it whatever the machine's speed (the default is 20 ms); nginx and curl inherit
  // it. Under the eager set-up every fetch must be on shm from its first byte, with no late move
  // to stand in: the launcher's exit passes the rendezvous to nginx's master (root), whose
  // workers claim the channels from it (rendezvous_owner.h). Before, the first worker to accept
  // took it over, ran as nobody, and every root client fell back to TCP.
  const bool late = LateSetUp();
  setenv("SAN_UPGRADE_DELAY_US", late ? "2000" : "600000000", 1);
  const std::string page = PatternText(4 << 20);
  std::ofstream(dir_ + "/www/page.txt") << page;
  chmod((dir_ + "/www/page.txt").c_str(), 0644);
  const std::string pid_file = dir_ + "/nginx.pid";
  // The default start-up: `daemon on` (nginx listens, then forks and the parent exits).
  std::ofstream(dir_ + "/nginx.conf")
      << "daemon on; master_process on; worker_processes " << workers << "; pid " << pid_file
      << ";\n"
      << "error_log " << dir_ << "/error.log warn;\n"
      << "events { worker_connections 64; }\n"
      << "http { access_log off; client_body_temp_path " << dir_ << "/body;\n"
      << "  proxy_temp_path " << dir_ << "/proxy; fastcgi_temp_path " << dir_ << "/fcgi;\n"
      << "  uwsgi_temp_path " << dir_ << "/uwsgi; scgi_temp_path " << dir_ << "/scgi;\n"
      << "  server { listen 127.0.0.1:" << port_ << "; root " << dir_ << "/www; } }\n";
  reaper_->AddSessionPidFile(pid_file);
  Program& launcher = Start({"nginx", "-p", dir_, "-c", dir_ + "/nginx.conf"}, true, "nginx");
  ASSERT_EQ(launcher.Wait(10000), 0) << "nginx did not daemonise\n" << ReadAll(dir_ + "/error.log");
  ASSERT_TRUE(WaitFor([&] { return ListenerCount(port_) >= 1 && PidIn(pid_file) > 0; }, 10000));

  constexpr int kFetches = 3;
  for (int i = 0; i < kFetches; ++i) {
    const std::string out = dir_ + "/got" + std::to_string(i);
    Program& curl = Start({"curl", "-sS", "--fail", "--max-time", "10", "--limit-rate", "100M",
                           "-o", out, "http://127.0.0.1:{port}/page.txt"},
                          kind == ClientKind::kSan, "curl" + std::to_string(i));
    EXPECT_EQ(curl.Wait(15000), 0)
        << KindName(kind) << " curl " << i << ": " << Log("curl" + std::to_string(i));
    EXPECT_TRUE(ReadAll(out) == page) << KindName(kind) << " curl " << i << ": page differs";
  }
  if (kind == ClientKind::kSan) {
    // Every fetch intact (above) and never reset. Late: of the moves to shm, which depend on both
    // ends taking their steps within a fetch's 40 ms, at least two of three (one falling short on
    // a loaded machine stays plain TCP, which is correct, only slower). Eager: all of them.
    const Usage u = UsageOf(report_, "curl");
    EXPECT_GE(u.shm_connections, static_cast<uint64_t>(late ? kFetches - 1 : kFetches))
        << "curl: shm connections";
    EXPECT_EQ(u.shm_connections + u.tcp_connections, static_cast<uint64_t>(kFetches));
  }
  const pid_t master = PidIn(pid_file);
  ASSERT_GT(master, 1);
  kill(master, SIGQUIT);  // graceful: the workers exit and write their SAN_REPORT lines
  EXPECT_TRUE(WaitGone(master, 5000)) << "nginx master did not stop";
  if (kind == ClientKind::kSan) {
    const Usage n = UsageOf(report_, "nginx");
    EXPECT_GE(n.shm_connections, static_cast<uint64_t>(late ? kFetches - 1 : kFetches))
        << "nginx: shm connections";
  } else {
    ExpectServerEnd(report_, "nginx", kind, kFetches);
  }
  if (HasFailure()) std::cerr << "---- nginx error.log\n" << Tail(ReadAll(dir_ + "/error.log"));
}

INSTANTIATE_TEST_SUITE_P(DaemonOn, NginxDaemon,
                         ::testing::Combine(::testing::Values(1, 2),
                                            ::testing::Values(ClientKind::kSan,
                                                              ClientKind::kPlain)),
                         [](const ::testing::TestParamInfo<NginxDaemon::ParamType>& info) {
                           return std::to_string(std::get<0>(info.param)) + "Workers_" +
                                  (std::get<1>(info.param) == ClientKind::kSan ? "SanCurl"
                                                                               : "PlainCurl");
                         });

class RedisDaemon : public StartupTest, public ::testing::WithParamInterface<ClientKind> {};

TEST_P(RedisDaemon, RedisCliSetGetPing) {
  const ClientKind kind = GetParam();
  if (!Installed("redis-server") || !Installed("redis-cli"))
    GTEST_SKIP() << "redis is not installed";
  const std::string pid_file = dir_ + "/redis.pid";
  reaper_->AddSessionPidFile(pid_file);
  Program& launcher =
      Start({"redis-server", "--port", "{port}", "--bind", "127.0.0.1", "--daemonize", "yes",
             "--pidfile", pid_file, "--logfile", dir_ + "/redis.log", "--save", "", "--appendonly",
             "no", "--dir", dir_},
            true, "redis");
  ASSERT_EQ(launcher.Wait(10000), 0) << "redis-server did not daemonise";
  ASSERT_TRUE(WaitFor([&] { return ListenerCount(port_) >= 1 && PidIn(pid_file) > 0; }, 10000));

  const std::string value = PatternText(64 * 1024);
  const bool san = kind == ClientKind::kSan;
  Program& set = Start({"redis-cli", "-p", "{port}", "set", "big", value}, san, "set");
  EXPECT_EQ(set.Wait(10000), 0) << Log("set");
  EXPECT_NE(Log("set").find("OK\n"), std::string::npos) << Log("set");
  Program& get = Start({"redis-cli", "-p", "{port}", "get", "big"}, san, "get");
  EXPECT_EQ(get.Wait(10000), 0);
  EXPECT_NE(Log("get").find(value + "\n"), std::string::npos)
      << "value differs (" << Log("get").size() << " bytes)";
  Program& ping = Start({"redis-cli", "-p", "{port}", "ping"}, san, "ping");
  EXPECT_EQ(ping.Wait(10000), 0) << Log("ping");
  EXPECT_NE(Log("ping").find("PONG\n"), std::string::npos) << Log("ping");
  if (san) ExpectClientsAccelerated(report_, "redis-cli", 3);
  const pid_t server = PidIn(pid_file);
  ASSERT_GT(server, 1);
  kill(server, SIGTERM);  // redis exits cleanly (nothing to save) and writes its SAN_REPORT line
  EXPECT_TRUE(WaitGone(server, 5000)) << "redis-server did not stop";
  ExpectServerEnd(report_, "redis-server", kind, 3);
  if (HasFailure()) std::cerr << "---- redis.log\n" << Tail(ReadAll(dir_ + "/redis.log"));
}

INSTANTIATE_TEST_SUITE_P(Daemonize, RedisDaemon,
                         ::testing::Values(ClientKind::kSan, ClientKind::kPlain),
                         NameByClientKind("RedisCli"));

// memcached the way its Debian unit starts it, as root: `-d` (daemonise) and `-u nobody` (drop
// privileges), so every connection joins two users (the client root, the server nobody). The
// client keeps one connection for 200 set/get rounds of up to 64 KiB, which moves it to shm (by
// its calls, proved by the TCP connection itself); SAN_PEER_USERS=same at both ends keeps it
// kernel TCP, each end saying why.
class MemcachedDaemon : public StartupTest {
 protected:
  // Starts `memcached -d -u nobody`; its pid file in a directory nobody may write.
  void StartMemcached() {
    if (!Installed("memcached") || !Installed("/usr/bin/python3")) {
      GTEST_SKIP() << "memcached or python3 is not installed";
    }
    if (geteuid() != 0 || !getpwnam("nobody")) GTEST_SKIP() << "needs root and the nobody user";
    run_ = dir_ + "/run";
    fs::create_directories(run_);
    chmod(run_.c_str(), 0777);
    pid_file_ = run_ + "/memcached.pid";
    reaper_->AddSessionPidFile(pid_file_);
    Program& launcher = Start({"memcached", "-d", "-u", "nobody", "-p", "{port}", "-U", "0", "-l",
                               "127.0.0.1", "-m", "64", "-P", pid_file_},
                              true, "memcached");
    ASSERT_EQ(launcher.Wait(10000), 0) << "memcached did not daemonise: " << Log("memcached");
    ASSERT_TRUE(WaitFor([&] { return ListenerCount(port_) >= 1 && PidIn(pid_file_) > 0; }, 10000));
  }
  void RunClient(bool san) {
    Program& client =
        Start({"/usr/bin/python3", SAN_TEST_PROGRAMS "/memcache_client.py", "{port}", "200"}, san,
              "client");
    EXPECT_EQ(client.Wait(30000), 0) << Log("client");
    EXPECT_NE(Log("client").find("ok 200 rounds"), std::string::npos) << Log("client");
  }
  void StopMemcached() {
    const pid_t server = PidIn(pid_file_);
    ASSERT_GT(server, 1);
    kill(server, SIGTERM);  // memcached exits and writes its SAN_REPORT line
    EXPECT_TRUE(WaitGone(server, 5000)) << "memcached did not stop";
  }
  std::string run_, pid_file_;
};

TEST_F(MemcachedDaemon, AsNobodySanClientMovesToShmOnBothEnds) {
  StartMemcached();
  if (IsSkipped() || HasFatalFailure()) return;
  RunClient(true);
  const Usage c = UsageOf(report_, "python3");
  EXPECT_EQ(c.shm_connections, 1u) << "client end (root) not on shm";
  EXPECT_EQ(c.tcp_connections, 0u);
  StopMemcached();
  const Usage m = UsageOf(report_, "memcached");
  EXPECT_EQ(m.shm_connections, 1u) << "server end (nobody) not on shm";
  EXPECT_EQ(m.tcp_connections, 0u);
}

TEST_F(MemcachedDaemon, AsNobodyPlainClientStaysKernelTcp) {
  StartMemcached();
  if (IsSkipped() || HasFatalFailure()) return;
  RunClient(false);
  StopMemcached();
  const Usage m = UsageOf(report_, "memcached");
  EXPECT_EQ(m.shm_connections, 0u);
  EXPECT_EQ(m.tcp_connections, 1u) << "server end (nobody): the plain client's connection";
}

TEST_F(MemcachedDaemon, SamePeerUsersKeepsBothEndsOnTcpAndSaysWhy) {
  // Both ends inherit these through sanrun; the log goes to a file nobody may write (memcached
  // -d has its stderr on /dev/null).
  setenv("SAN_PEER_USERS", "same", 1);
  setenv("SAN_LOG", "info", 1);
  const std::string log_file = dir_ + "/san.log";
  std::ofstream(log_file).flush();
  chmod(log_file.c_str(), 0666);
  setenv("SAN_LOG_FILE", log_file.c_str(), 1);
  StartMemcached();
  if (!IsSkipped() && !HasFatalFailure()) {
    RunClient(true);
    StopMemcached();
    const Usage c = UsageOf(report_, "python3"), m = UsageOf(report_, "memcached");
    EXPECT_EQ(c.shm_connections + m.shm_connections, 0u) << "moved although refused";
    EXPECT_EQ(c.tcp_connections, 1u);
    EXPECT_EQ(m.tcp_connections, 1u);
    const std::string log = ReadAll(log_file);
    const std::string nobody = std::to_string(getpwnam("nobody")->pw_uid);
    EXPECT_NE(log.find("SAN_PEER_USERS=same does not allow the peer's user (uid " + nobody + ")"),
              std::string::npos)
        << "the client's reason\n"
        << Tail(log);
    EXPECT_NE(log.find("SAN_PEER_USERS=same does not allow the peer's user (uid 0)"),
              std::string::npos)
        << "the server's reason\n"
        << Tail(log);
  }
  unsetenv("SAN_PEER_USERS");
  unsetenv("SAN_LOG");
  unsetenv("SAN_LOG_FILE");
}

// iperf3 as a daemon (`-s -D`, the way its Debian unit starts it): the server forks and the
// parent exits. A 1 s test from a client under sanrun (or plain): the result must come back, the
// data connection must move to shm on both ends for a SAN client (a second of bulk data is far
// past SAN_UPGRADE_BYTES), and stay kernel TCP at the server's end for a plain one.
class Iperf3Daemon : public StartupTest, public ::testing::WithParamInterface<ClientKind> {};

TEST_P(Iperf3Daemon, OneSecondTestThroughTheDaemon) {
  const ClientKind kind = GetParam();
  if (!Installed("iperf3")) GTEST_SKIP() << "iperf3 is not installed";
  const std::string pid_file = dir_ + "/iperf3.pid";
  reaper_->AddSessionPidFile(pid_file);
  Program& launcher = Start({"iperf3", "-s", "-D", "-B", "127.0.0.1", "-p", "{port}", "-I",
                             pid_file, "--logfile", dir_ + "/iperf3.log"},
                            true, "iperf3d");
  ASSERT_EQ(launcher.Wait(10000), 0) << "iperf3 did not daemonise: " << Log("iperf3d");
  ASSERT_TRUE(WaitFor([&] { return ListenerCount(port_) >= 1 && PidIn(pid_file) > 0; }, 10000));
  const bool san = kind == ClientKind::kSan;
  Program& client =
      Start({"iperf3", "-c", "127.0.0.1", "-p", "{port}", "-t", "1", "-J"}, san, "client");
  EXPECT_EQ(client.Wait(30000), 0) << Log("client");
  const std::string json = Log("client");
  EXPECT_NE(json.find("\"sum_received\""), std::string::npos) << json;
  EXPECT_EQ(json.find("\"error\""), std::string::npos) << json;
  const pid_t server = PidIn(pid_file);
  ASSERT_GT(server, 1);
  kill(server, SIGTERM);  // iperf3 exits on it and writes its SAN_REPORT line
  EXPECT_TRUE(WaitGone(server, 5000)) << "iperf3 did not stop";
  const Usage c = UsageOf(report_, "iperf3");  // both ends' lines: the daemon and the client
  if (san) {
    // The control connection and the data stream, at each end; at least the data stream moved.
    // (The launcher leaves through daemon(3), whose parent ends in glibc's own _exit: no line.)
    EXPECT_EQ(c.lines, 2u) << "the daemon's and the client's";
    EXPECT_GE(c.shm_connections, 2u) << "the data stream did not move on both ends";
  } else {
    EXPECT_GE(c.tcp_connections, 2u) << "the daemon's end of the plain client's connections";
    EXPECT_EQ(c.shm_connections, 0u);
  }
  if (HasFailure()) std::cerr << "---- iperf3.log\n" << Tail(ReadAll(dir_ + "/iperf3.log"));
}

INSTANTIATE_TEST_SUITE_P(Daemon, Iperf3Daemon,
                         ::testing::Values(ClientKind::kSan, ClientKind::kPlain),
                         NameByClientKind("Client"));

// The process of ours (re-parented to us: StartupTest's Reaper makes the test a subreaper) whose
// command name is `comm`, or 0.
pid_t ChildNamed(const std::string& comm) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::istringstream stat(ReadAll(entry.path().string() + "/stat"));
    pid_t pid = 0, ppid = 0;
    std::string paren_comm;
    char state = 0;
    stat >> pid >> paren_comm >> state >> ppid;
    if (ppid == getpid() && paren_comm == "(" + comm + ")") return pid;
  }
  return 0;
}

// vsftpd as a daemon (`background=YES`: it forks, the parent exits and the child listens on; its
// sessions fork from that child), three passive downloads of 4 MiB by curl under sanrun or plain:
// every byte intact, never a reset or a refusal. A session passes its data connections between
// its two processes (SCM_RIGHTS), so under the late set-up they stay kernel TCP
// (docs/sockets.md, "What late gives up"); a SAN client's connections are counted either way.
class VsftpdDaemon : public StartupTest, public ::testing::WithParamInterface<ClientKind> {};

TEST_P(VsftpdDaemon, CurlDownloadsThroughTheDaemon) {
  const ClientKind kind = GetParam();
  if (!Installed("/usr/sbin/vsftpd") || !Installed("curl")) {
    GTEST_SKIP() << "vsftpd or curl is not installed";
  }
  if (geteuid() != 0 || !getpwnam("ftp")) GTEST_SKIP() << "vsftpd needs root and the ftp user";
  const std::string root = dir_ + "/root", empty = dir_ + "/empty";
  fs::create_directories(root);
  fs::create_directories(empty);
  chmod(root.c_str(), 0755);
  chmod(empty.c_str(), 0755);
  const std::string page = PatternText(4 << 20);
  std::ofstream(root + "/page.txt") << page;
  chmod((root + "/page.txt").c_str(), 0644);
  // vsftpd's defaults but for the daemon mode, the address, anonymous reads from `root`, no log,
  // and the two sandboxes this VM's kernel refuses (as in the transparency suite).
  std::ofstream(dir_ + "/vsftpd.conf")
      << "listen=YES\nbackground=YES\nlisten_address=127.0.0.1\nlisten_port=" << port_
      << "\nanonymous_enable=YES\nlocal_enable=NO\nno_anon_password=YES\nanon_root=" << root
      << "\nisolate_network=NO\nseccomp_sandbox=NO\nsecure_chroot_dir=" << empty
      << "\nxferlog_enable=NO\n";
  Program& launcher = Start({"/usr/sbin/vsftpd", dir_ + "/vsftpd.conf"}, true, "vsftpd");
  ASSERT_EQ(launcher.Wait(10000), 0) << "vsftpd did not daemonise: " << Log("vsftpd");
  ASSERT_TRUE(WaitFor([&] { return ListenerCount(port_) >= 1; }, 10000)) << Log("vsftpd");
  const pid_t daemon = ChildNamed("vsftpd");
  ASSERT_GT(daemon, 1) << "the daemonised vsftpd is not among the processes re-parented to us";

  constexpr int kFetches = 3;
  for (int i = 0; i < kFetches; ++i) {
    const std::string out = dir_ + "/got" + std::to_string(i);
    Program& curl = Start(
        {"curl", "-sS", "--fail", "--max-time", "20", "-o", out, "ftp://127.0.0.1:{port}/page.txt"},
        kind == ClientKind::kSan, "curl" + std::to_string(i));
    EXPECT_EQ(curl.Wait(30000), 0)
        << KindName(kind) << " curl " << i << ": " << Log("curl" + std::to_string(i));
    EXPECT_TRUE(ReadAll(out) == page) << KindName(kind) << " curl " << i << ": file differs";
  }
  if (kind == ClientKind::kSan) {
    // Control and data connection of each fetch; on shm only with the eager set-up, and then at
    // least the control connections (the data ones are passed between the session's processes).
    const Usage u = UsageOf(report_, "curl");
    EXPECT_EQ(u.shm_connections + u.tcp_connections, static_cast<uint64_t>(2 * kFetches));
    if (!LateSetUp()) {
      EXPECT_GE(u.shm_connections, static_cast<uint64_t>(kFetches));
    }
  }
  kill(daemon, SIGTERM);
  EXPECT_TRUE(WaitGone(daemon, 5000)) << "vsftpd did not stop";
}

INSTANTIATE_TEST_SUITE_P(Background, VsftpdDaemon,
                         ::testing::Values(ClientKind::kSan, ClientKind::kPlain),
                         NameByClientKind("Curl"));

}  // namespace
}  // namespace san::testing_support
