// The transparency suite: real programs from Debian packages, unmodified, under `sanrun`. Each
// case checks the result is right (bytes, checksums, the tool's own success output) and that the
// connection really was accelerated (the library's SAN_REPORT line: shm connections, no TCP
// fallback), then runs again with the server plain: the client must fall back to TCP and still be
// right. The server's end is checked the same way, from its own SAN_REPORT lines (written when
// the server process exits: each case stops its server first). Every server is started and
// stopped by its test, on a port chosen at run time.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "compat/real_programs.h"

#ifndef SAN_TEST_PROGRAMS
#error "SAN_TEST_PROGRAMS (tests/compat/programs) must be defined by the build"
#endif
#ifndef SAN_SANRUN
#error "SAN_SANRUN (the sanrun binary) must be defined by the build"
#endif

namespace san::testing_support {
namespace {

namespace fs = std::filesystem;

#define REQUIRE_TOOLS(...)                                                                      \
  for (const char* tool : {__VA_ARGS__}) {                                                      \
    if (!Installed(tool)) GTEST_SKIP() << tool << " is not installed (deploy/install-deps.sh)"; \
  }

// kBothSanEager: both ends under sanrun with SAN_SETUP=eager (every connection on shm from
// connect()); kBothSan: both under sanrun's default, the late set-up (a connection moves to shm
// once it lived 20 ms or carried 256 KiB, so short ones stay TCP); kServerPlain: the client alone
// under sanrun.
enum class Setup { kBothSanEager, kBothSan, kServerPlain };

std::string SetupName(const ::testing::TestParamInfo<Setup>& info) {
  switch (info.param) {
    case Setup::kBothSanEager:
      return "BothSanEager";
    case Setup::kBothSan:
      return "BothSan";
    default:
      return "ServerPlain";
  }
}

class Transparency : public ::testing::TestWithParam<Setup> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sanlib-transparency-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);  // servers that drop privileges (nginx workers) read files here
    report_ = dir_ + "/report";
    // Servers that drop privileges (nginx workers, vsftpd sessions) write their lines here too.
    server_report_ = dir_ + "/server-report";
    std::ofstream(server_report_).flush();
    chmod(server_report_.c_str(), 0666);
  }
  void TearDown() override { fs::remove_all(dir_); }

  bool san_server() const { return GetParam() != Setup::kServerPlain; }
  bool eager() const { return GetParam() == Setup::kBothSanEager; }
  bool late() const { return GetParam() == Setup::kBothSan; }
  std::map<std::string, std::string> Env(const std::string& report) const {
    std::map<std::string, std::string> env = {{"SAN_REPORT", report}};
    if (eager()) env["SAN_SETUP"] = "eager";  // else sanrun's default, late
    return env;
  }

  // A server (under sanrun unless the setup says plain) and a client (always under sanrun).
  std::unique_ptr<Program> Server(const std::vector<std::string>& argv, const std::string& name) {
    return std::make_unique<Program>(RealProgram(argv, san_server() ? SAN_SANRUN : "",
                                                 Env(server_report_), dir_ + "/" + name + ".log"));
  }
  std::unique_ptr<Program> Client(const std::vector<std::string>& argv, const std::string& name,
                                  const std::map<std::string, std::string>& more = {}) {
    std::map<std::string, std::string> env = Env(report_);
    env.insert(more.begin(), more.end());
    return std::make_unique<Program>(RealProgram(argv, SAN_SANRUN, env, dir_ + "/" + name + ".log"));
  }

  // The client's connections were all SAN (both sides sanlib, eager) or all TCP (plain server);
  // under the late set-up, at least `moved` of them moved to shm: only connections that live
  // well past the 20 ms delay count on it (a bulk transfer of a few MB may move mid-way or end
  // first, depending on timing).
  void ExpectAccelerated(const std::string& prog, uint64_t at_least_connections,
                         uint64_t moved = 0) {
    ExpectEnd(report_, "client " + prog, UsageOf(report_, prog), at_least_connections, moved);
  }

  // The same of the server's end, once the server has exited (its lines are written at exit);
  // `prog` is the process that held the connections (a worker, a session). A plain server has
  // no sanlib and no lines: its end is kernel TCP by construction.
  void ExpectServerEnd(const std::string& prog, uint64_t at_least_connections,
                       uint64_t moved = 0) {
    if (!san_server()) return;
    const Usage u = UsageOf(server_report_, prog);
    EXPECT_GT(u.lines, 0u) << "server " << prog << " wrote no SAN_REPORT line";
    ExpectEnd(server_report_, "server " + prog, u, at_least_connections, moved);
  }

  void ExpectEnd(const std::string& report, const std::string& who, const Usage& u,
                 uint64_t at_least_connections, uint64_t moved) {
    if (late()) {
      EXPECT_GE(u.shm_connections + u.tcp_connections, at_least_connections) << who;
      EXPECT_GE(u.shm_connections, moved) << who << ": long connections did not move to shm";
    } else if (san_server()) {
      EXPECT_GE(u.shm_connections, at_least_connections) << who << ": not accelerated";
      EXPECT_EQ(u.tcp_connections, 0u) << who << ": fell back to TCP";
      EXPECT_GT(u.shm_bytes_sent + u.shm_bytes_received, 0u) << who;
    } else {
      EXPECT_EQ(u.shm_connections, 0u) << who << ": SAN against a plain server?";
      EXPECT_GE(u.tcp_connections, at_least_connections) << who << ": no fallback recorded";
    }
    if (HasFailure()) std::cerr << "---- " << report << "\n" << Contents(report);
  }

  std::string RandomFile(const std::string& name, size_t bytes) {
    std::string path = dir_ + "/" + name;
    std::mt19937_64 rng(bytes);
    std::string data(bytes, '\0');
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
      const uint64_t v = rng();
      memcpy(&data[i], &v, 8);
    }
    std::ofstream(path, std::ios::binary).write(data.data(), static_cast<std::streamsize>(bytes));
    return path;
  }
  static std::string Contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // See the Vsftpd* cases.
  void VsftpdDownload(bool isolate) {
    REQUIRE_TOOLS("/usr/sbin/vsftpd", "curl");
    if (geteuid() != 0 || !getpwnam("ftp")) GTEST_SKIP() << "vsftpd needs root and the ftp user";
    const std::string root = dir_ + "/root", empty = dir_ + "/empty";
    ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
    ASSERT_EQ(mkdir(empty.c_str(), 0755), 0);
    const std::string file = RandomFile("root/big.bin", 20 << 20), out = dir_ + "/got.bin";
    const uint16_t port = FreePort();
    std::ofstream(dir_ + "/vsftpd.conf")
        << "listen=YES\nlisten_address=127.0.0.1\nlisten_port=" << port
        << "\nanonymous_enable=YES\nlocal_enable=NO\nno_anon_password=YES\nanon_root=" << root
        << "\nisolate=" << (isolate ? "YES" : "NO") << "\nisolate_network=NO\nseccomp_sandbox=NO"
        << "\nsecure_chroot_dir=" << empty << "\nxferlog_enable=NO\n";
    auto server = Server({"/usr/sbin/vsftpd", dir_ + "/vsftpd.conf"}, "server");
    ASSERT_TRUE(WaitListening(port, 15000)) << server->Output();
    auto client = Client({"curl", "-sS", "--fail", "-o", out,
                          "ftp://127.0.0.1:" + std::to_string(port) + "/big.bin"},
                         "client", {{"SAN_LOG", "info"}});
    ASSERT_EQ(client->Wait(60000), 0) << client->Output() << server->Output();
    EXPECT_TRUE(Contents(file) == Contents(out))
        << "download differs: " << fs::file_size(out) << " of " << (20 << 20) << " bytes";
    EXPECT_EQ(client->Output().find("no reply from listener"), std::string::npos)
        << "a SAN set-up went unanswered: " << client->Output();
    const Usage u = UsageOf(report_, "curl");
    EXPECT_GE(u.shm_connections + u.tcp_connections, 2u);  // control and data
    // (Under the late set-up vsftpd's connections stay TCP: its control connection is held by
    // two processes of the session, its data connections are passed between them.)
    if (eager()) {
      EXPECT_GE(u.shm_connections, 1u) << "not accelerated";
    }
    server->Stop(SIGTERM, 10000);
    if (san_server()) {
      // The sessions' lines: they end with _exit (compat/interpose_exit.cc). The data connection
      // is accepted by the session's privileged half and passed to the other over SCM_RIGHTS, so
      // it moved to kernel TCP (docs/compat.md) -- on both ends, as curl's line says too. The
      // control connection's server end is counted by the listener process, which SIGTERM ends
      // without a line.
      const Usage v = UsageOf(server_report_, "vsftpd");
      EXPECT_GE(v.lines, 1u) << "no vsftpd session wrote its SAN_REPORT line";
      EXPECT_GE(v.tcp_connections, 1u) << Contents(server_report_);
      EXPECT_GE(u.tcp_connections, 1u) << "curl's data connection";
    }
  }

  std::string dir_;
  std::string report_;         // the clients' SAN_REPORT
  std::string server_report_;  // the servers'
};

TEST_P(Transparency, SocatFileTransfer) {
  REQUIRE_TOOLS("socat");
  const std::string in = RandomFile("in.bin", 8 << 20), out = dir_ + "/out.bin";
  const uint16_t port = FreePort();
  auto server = Server({"socat", "-u", "TCP-LISTEN:" + std::to_string(port) + ",bind=127.0.0.1",
                        "OPEN:" + out + ",creat,trunc"},
                       "server");
  ASSERT_TRUE(WaitListening(port, 10000)) << server->Output();
  auto client =
      Client({"socat", "-u", "OPEN:" + in, "TCP:127.0.0.1:" + std::to_string(port)}, "client");
  ASSERT_EQ(client->Wait(30000), 0) << client->Output();
  ASSERT_EQ(server->Wait(30000), 0) << server->Output();
  EXPECT_TRUE(Contents(in) == Contents(out)) << "socat copy differs";
  ExpectAccelerated("socat", 1);
  ExpectServerEnd("socat", 1);
}

TEST_P(Transparency, PythonHttpServerAndCurl) {
  REQUIRE_TOOLS("python3", "curl");
  const std::string file = RandomFile("page.bin", 3 << 20), out = dir_ + "/got.bin";
  const uint16_t port = FreePort();
  auto server = Server({"python3", "-m", "http.server", std::to_string(port), "--bind", "127.0.0.1",
                        "--directory", dir_},
                       "server");
  ASSERT_TRUE(WaitListening(port, 15000)) << server->Output();
  auto client = Client({"curl", "-sS", "--fail", "-o", out,
                        "http://127.0.0.1:" + std::to_string(port) + "/page.bin"},
                       "client");
  ASSERT_EQ(client->Wait(30000), 0) << client->Output();
  EXPECT_TRUE(Contents(file) == Contents(out)) << "download differs";
  ExpectAccelerated("curl", 1);
  server->Stop(SIGINT, 10000);  // KeyboardInterrupt: python exits, and writes its line
  ExpectServerEnd("python3", 1);
}

// Debian's python3-grpcio on both ends, its default poller (epoll): gRPC reads errno after a
// nonblocking connect() and the epoll_ctl() that follows, so an interposed call that changes errno
// when it succeeds fails every channel (it did: the channel never became ready).
TEST_P(Transparency, PythonGrpcioEchoOnItsDefaultPoller) {
  REQUIRE_TOOLS("/usr/bin/python3");
  if (std::system("/usr/bin/python3 -c 'import grpc' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-grpcio is not installed (deploy/install-deps.sh)";
  }
  const uint16_t port = FreePort();
  const std::string script = SAN_TEST_PROGRAMS "/grpc_echo.py";
  auto server =
      Server({"/usr/bin/python3", script, "server", std::to_string(port), "60"}, "server");
  ASSERT_TRUE(WaitListening(port, 15000)) << server->Output();
  auto client = Client({"/usr/bin/python3", script, "client", std::to_string(port)}, "client");
  ASSERT_EQ(client->Wait(60000), 0) << client->Output() << server->Output();
  EXPECT_NE(client->Output().find("ok 200 echoes"), std::string::npos) << client->Output();
  ExpectAccelerated("python3", 1);
  server->Stop(SIGINT, 10000);
  ExpectServerEnd("python3", 1);
}

// vsftpd started its default way (foreground), a 20 MB passive download by curl, bytes checked.
// With the default isolate=YES vsftpd starts each session with a raw clone() (no fork handlers
// run: socket/runtime.h, "missed fork"); the session's data listener must still answer a SAN
// client's set-up (it did not: every transfer stalled 5 s on "no reply from listener", then went
// on over TCP). isolate=NO forks.
TEST_P(Transparency, VsftpdDefaultIsolatedSessions) { VsftpdDownload(true); }
TEST_P(Transparency, VsftpdIsolateNo) { VsftpdDownload(false); }

// openbsd-inetd (foreground with -d, as the ftpd interop test runs it) starting cat as an echo
// service: its child puts the connection on fds 0-2 and calls close_range(3, ~0U) before exec,
// which used to close sanlib's own fds too -- cat got a reset socket and the client nothing. cat
// runs without the layer here (inetd does not pass LD_PRELOAD on), so the connection moves to
// kernel TCP at the exec (docs/compat.md "exec"): the client starts on shm, ends on TCP, and
// gets every byte and EOF.
TEST_P(Transparency, OpenbsdInetdEchoService) {
  REQUIRE_TOOLS("/usr/sbin/inetd", "/usr/bin/python3");
  const uint16_t port = FreePort();
  std::ofstream(dir_ + "/inetd.conf")
      << "127.0.0.1:" << port << " stream tcp nowait root /bin/cat cat\n";
  auto server = Server({"/usr/sbin/inetd", "-d", dir_ + "/inetd.conf"}, "server");
  ASSERT_TRUE(WaitListening(port, 15000)) << server->Output();
  auto client = Client(
      {"/usr/bin/python3", SAN_TEST_PROGRAMS "/echo_client.py", std::to_string(port)}, "client");
  ASSERT_EQ(client->Wait(30000), 0) << client->Output() << server->Output();
  EXPECT_NE(client->Output().find("ok 1048576 bytes echoed"), std::string::npos) << client->Output();
  const Usage u = UsageOf(report_, "python3");
  if (eager()) {
    EXPECT_EQ(u.shm_connections, 1u) << "the connection did not start on shm";
  } else {  // plain, or late: cat runs without the layer, so the connection never moves
    EXPECT_EQ(u.tcp_connections, 1u);
  }
  server->Stop(SIGTERM, 10000);
}

// Node.js's http server: libuv closes sockets with a raw close system call, which left the SAN
// socket registered, and the next connection the kernel gave that fd number was reset (from
// plain clients too). 20 short connections in a row, each a new curl, every one must get 200.
TEST_P(Transparency, NodeHttpServerManyShortConnections) {
  REQUIRE_TOOLS("node", "curl");
  const uint16_t port = FreePort();
  auto server =
      Server({"node", SAN_TEST_PROGRAMS "/node_server.js", std::to_string(port)}, "server");
  ASSERT_TRUE(WaitListening(port, 15000)) << server->Output();
  for (int i = 0; i < 20; ++i) {
    const std::string out = dir_ + "/got" + std::to_string(i);
    auto client = Client(
        {"curl", "-sS", "--fail", "-o", out, "http://127.0.0.1:" + std::to_string(port) + "/"},
        "client" + std::to_string(i));
    ASSERT_EQ(client->Wait(30000), 0) << "request " << i << ": " << client->Output();
    EXPECT_EQ(Contents(out), std::string(1024, 'n')) << "request " << i;
  }
  const Usage u = UsageOf(report_, "curl");
  EXPECT_EQ(u.shm_connections + u.tcp_connections, 20u);
  server->Stop(SIGTERM, 10000);  // node_server.js exits on it
  ExpectServerEnd("node", 20);
}

TEST_P(Transparency, NginxPreforkAndCurl) {
  REQUIRE_TOOLS("nginx", "curl");
  const std::string www = dir_ + "/www";
  fs::create_directories(www);
  fs::create_directories(dir_ + "/logs");
  chmod(www.c_str(), 0755);
  const std::string file = RandomFile("www/index.bin", 2 << 20);
  chmod(file.c_str(), 0644);
  const uint16_t port = FreePort();
  std::ofstream(dir_ + "/nginx.conf")
      << "daemon off; master_process on; worker_processes 2; pid " << dir_ << "/nginx.pid;\n"
      << "error_log " << dir_ << "/logs/error.log warn;\n"
      << "events { worker_connections 64; }\n"
      << "http { access_log off; sendfile on; client_body_temp_path " << dir_ << "/body;\n"
      << "  proxy_temp_path " << dir_ << "/proxy; fastcgi_temp_path " << dir_ << "/fcgi;\n"
      << "  uwsgi_temp_path " << dir_ << "/uwsgi; scgi_temp_path " << dir_ << "/scgi;\n"
      << "  server { listen 127.0.0.1:" << port << "; root " << www << "; } }\n";
  auto server = Server({"nginx", "-p", dir_, "-c", dir_ + "/nginx.conf"}, "server");
  ASSERT_TRUE(WaitListening(port, 10000)) << server->Output();
  // Several requests: the two workers (which drop to another user) each accept some.
  for (int i = 0; i < 6; ++i) {
    const std::string out = dir_ + "/got" + std::to_string(i);
    auto client = Client({"curl", "-sS", "--fail", "-o", out,
                          "http://127.0.0.1:" + std::to_string(port) + "/index.bin"},
                         "client" + std::to_string(i));
    ASSERT_EQ(client->Wait(30000), 0) << client->Output() << server->Output();
    EXPECT_TRUE(Contents(file) == Contents(out)) << "download " << i << " differs";
  }
  // Under the late set-up each 2 MB response may go whole into the kernel's socket buffers in
  // one sendfile (nginx's sockets are nonblocking), before either end has a reason to move.
  ExpectAccelerated("curl", 6);
  // wrk -c8 under the late set-up too: a peer's wake byte alone must not make wrk's socket
  // readable (it did: read() then returned EAGAIN, which wrk 4.1 counts as a socket error).
  if (Installed("wrk")) {
    // wrk sizes its event loop by its connection count: sanlib's own fds must stay out of the
    // numbers it expects (common/fd_placement.h).
    auto wrk = Client(
        {"wrk", "-t1", "-c8", "-d1s", "http://127.0.0.1:" + std::to_string(port) + "/index.bin"},
        "wrk");
    ASSERT_EQ(wrk->Wait(30000), 0) << wrk->Output();
    EXPECT_NE(wrk->Output().find(" requests in "), std::string::npos) << wrk->Output();
    EXPECT_EQ(wrk->Output().find("Socket errors"), std::string::npos)
        << wrk->Output() << "nginx's error.log:\n"
        << Contents(dir_ + "/logs/error.log");
    EXPECT_EQ(wrk->Output().find("Non-2xx"), std::string::npos) << wrk->Output();
    ExpectAccelerated("wrk", 8, 1);
  }
  server->Stop(SIGQUIT, 10000);  // graceful: the workers exit and write their lines
  ExpectServerEnd("nginx", Installed("wrk") ? 14 : 6);
}

TEST_P(Transparency, RedisServerAndBenchmark) {
  REQUIRE_TOOLS("redis-server", "redis-cli", "redis-benchmark");
  const uint16_t port = FreePort();
  const std::string p = std::to_string(port);
  auto server = Server({"redis-server", "--port", p, "--bind", "127.0.0.1", "--save", "",
                        "--appendonly", "no", "--dir", dir_},
                       "server");
  ASSERT_TRUE(WaitListening(port, 10000)) << server->Output();
  auto set = Client({"redis-cli", "-p", p, "set", "sanlib", "accelerated"}, "set");
  ASSERT_EQ(set->Wait(10000), 0) << set->Output();
  auto get = Client({"redis-cli", "-p", p, "get", "sanlib"}, "get");
  ASSERT_EQ(get->Wait(10000), 0);
  EXPECT_EQ(get->Output(), "accelerated\n");
  auto bench = Client({"redis-benchmark", "-p", p, "-t", "set,get", "-n", "3000", "-c", "10", "-q"},
                      "bench");
  ASSERT_EQ(bench->Wait(60000), 0) << bench->Output();
  EXPECT_NE(bench->Output().find("SET: "), std::string::npos) << bench->Output();
  EXPECT_NE(bench->Output().find("GET: "), std::string::npos) << bench->Output();
  ExpectAccelerated("redis-benchmark", 10, 1);
  auto stop = Client({"redis-cli", "-p", p, "shutdown", "nosave"}, "stop");
  stop->Wait(10000);
  EXPECT_EQ(server->Wait(10000), 0) << server->Output();
  ExpectServerEnd("redis-server", 12, 1);
}

TEST_P(Transparency, MemcachedCopyAndCat) {
  REQUIRE_TOOLS("memcached", "memccp", "memccat");
  const uint16_t port = FreePort();
  const std::string servers = "--servers=127.0.0.1:" + std::to_string(port);
  auto server = Server({"memcached", "-p", std::to_string(port), "-U", "0", "-l", "127.0.0.1", "-u",
                        "root", "-m", "64"},
                       "server");
  ASSERT_TRUE(WaitListening(port, 10000)) << server->Output();
  const std::string file = RandomFile("item", 200000);
  auto cp = Client({"memccp", servers, file}, "cp");
  ASSERT_EQ(cp->Wait(20000), 0) << cp->Output();
  auto cat = Client({"memccat", servers, "item"}, "cat");
  ASSERT_EQ(cat->Wait(20000), 0);
  EXPECT_TRUE(cat->Output() == Contents(file) + "\n") << "memccat returned other bytes";
  ExpectAccelerated("memcc", 2);
  server->Stop(SIGTERM, 10000);
  ExpectServerEnd("memcached", 2);
}

TEST_P(Transparency, Iperf3) {
  REQUIRE_TOOLS("iperf3");
  const uint16_t port = FreePort();
  auto server =
      Server({"iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", std::to_string(port)}, "server");
  ASSERT_TRUE(WaitListening(port, 10000)) << server->Output();
  auto client =
      Client({"iperf3", "-c", "127.0.0.1", "-p", std::to_string(port), "-t", "1", "-J"}, "client");
  ASSERT_EQ(client->Wait(30000), 0) << client->Output();
  const std::string json = client->Output();
  EXPECT_NE(json.find("\"sum_received\""), std::string::npos) << json;
  EXPECT_EQ(json.find("\"error\""), std::string::npos) << json;
  EXPECT_EQ(server->Wait(15000), 0) << server->Output();
  ExpectAccelerated("iperf3", 2, 1);  // the control connection and the data stream
  ExpectServerEnd("iperf3", 2, 1);
}

TEST_P(Transparency, NetpipeIntegrityCheck) {
  REQUIRE_TOOLS("NPtcp");
  const uint16_t port = FreePort();
  // Both ends take the same options (-i: NetPIPE checks every byte it receives, not timing).
  auto receiver = Server({"NPtcp", "-P", std::to_string(port), "-i", "-u", "131072"}, "receiver");
  ASSERT_TRUE(WaitListening(port, 10000)) << receiver->Output();
  auto sender = Client({"NPtcp", "-h", "127.0.0.1", "-P", std::to_string(port), "-i", "-u",
                        "131072", "-o", dir_ + "/np.out"},
                       "sender");
  ASSERT_EQ(sender->Wait(60000), 0) << sender->Output();
  EXPECT_EQ(sender->Output().find("Integrity check failed"), std::string::npos) << sender->Output();
  EXPECT_NE(sender->Output().find("Integrity check passed"), std::string::npos) << sender->Output();
  EXPECT_EQ(receiver->Wait(10000), 0) << receiver->Output();
  ExpectAccelerated("NPtcp", 1, 1);
  ExpectServerEnd("NPtcp", 1, 1);
}

TEST_P(Transparency, SockperfPingPong) {
  REQUIRE_TOOLS("sockperf");
  const uint16_t port = FreePort();
  auto server =
      Server({"sockperf", "sr", "--tcp", "-i", "127.0.0.1", "-p", std::to_string(port)}, "server");
  ASSERT_TRUE(WaitListening(port, 10000)) << server->Output();
  // A fixed message rate: at the default "max" rate sockperf 3.7 stops with "_seqN >
  // m_maxSequenceNo" once the path is fast enough (the SAN path; bytes are checked elsewhere).
  auto client = Client({"sockperf", "pp", "--tcp", "-i", "127.0.0.1", "-p", std::to_string(port),
                        "-t", "1", "--mps", "20000"},
                       "client");
  ASSERT_EQ(client->Wait(30000), 0) << client->Output();
  EXPECT_NE(client->Output().find("Summary: Latency is"), std::string::npos) << client->Output();
  ExpectAccelerated("sockperf", 1, 1);
  server->Stop(SIGINT, 10000);
  ExpectServerEnd("sockperf", 1, 1);
}

// PostgreSQL the way its tools start it: initdb and `pg_ctl start` as the postgres user (the
// postmaster daemonises; it forks a backend per connection after accepting it), pgbench and psql
// as root: every connection joins two users, and each backend moves the connection its parent
// accepted. pgbench's two clients run 2 s of TPC-B and must move to shm on both ends (the short
// set-up connections may stay TCP); the database must add up afterwards.
TEST_P(Transparency, PostgresqlPgbench) {
  const std::string bin = "/usr/lib/postgresql/15/bin";
  if (!Installed(bin + "/pg_ctl") || !Installed(bin + "/pgbench") || !Installed("psql")) {
    GTEST_SKIP() << "postgresql 15 is not installed (deploy/install-deps.sh)";
  }
  const passwd* pg = getpwnam("postgres");
  if (geteuid() != 0 || !pg) GTEST_SKIP() << "needs root and the postgres user";
  const std::string data = dir_ + "/pgdata", run = dir_ + "/pgrun";
  for (const std::string& d : {data, run}) {
    ASSERT_EQ(mkdir(d.c_str(), 0700), 0);
    ASSERT_EQ(chown(d.c_str(), pg->pw_uid, pg->pw_gid), 0);
  }
  const std::vector<std::string> as_postgres = {"runuser", "-u", "postgres", "--"};
  auto with = [](std::vector<std::string> head, const std::vector<std::string>& tail) {
    head.insert(head.end(), tail.begin(), tail.end());
    return head;
  };
  Program initdb(RealProgram(
      with(as_postgres, {bin + "/initdb", "-D", data, "-A", "trust", "-U", "postgres"}), "", {},
      dir_ + "/initdb.log"));
  ASSERT_EQ(initdb.Wait(120000), 0) << initdb.Output();
  const std::string port = std::to_string(FreePort());
  auto start = Server(with(as_postgres, {bin + "/pg_ctl", "-D", data, "-l", run + "/server.log",
                                         "-w", "-o",
                                         "-p " + port + " -k " + run +
                                             " -c listen_addresses=127.0.0.1",
                                         "start"}),
                      "pg_ctl");
  ASSERT_EQ(start->Wait(60000), 0) << start->Output() << Contents(run + "/server.log");
  const std::vector<std::string> where = {"-h", "127.0.0.1", "-p", port, "-U", "postgres"};
  auto init = Client(with({bin + "/pgbench", "-i", "-s", "1"}, with(where, {"postgres"})), "init");
  EXPECT_EQ(init->Wait(60000), 0) << init->Output();
  auto bench =
      Client(with({bin + "/pgbench", "-c", "2", "-T", "2"}, with(where, {"postgres"})), "bench");
  EXPECT_EQ(bench->Wait(60000), 0) << bench->Output();
  EXPECT_NE(bench->Output().find("number of failed transactions: 0 "), std::string::npos)
      << bench->Output();
  // TPC-B keeps the branch, teller and account balances and the history in step.
  auto check = Client(with({"psql", "-tA"}, with(where, {"-c",
                           "select (select sum(abalance) from pgbench_accounts) = "
                           "(select sum(delta) from pgbench_history) and (select "
                           "sum(bbalance) from pgbench_branches) = (select sum(delta) from "
                           "pgbench_history)",
                           "postgres"})),
                      "check");
  EXPECT_EQ(check->Wait(30000), 0) << check->Output();
  EXPECT_EQ(check->Output(), "t\n");
  Program stop(RealProgram(
      with(as_postgres, {bin + "/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"}), "", {},
      dir_ + "/stop.log"));
  EXPECT_EQ(stop.Wait(60000), 0) << stop.Output();
  const Usage client = UsageOf(report_, "pgbench"), server = UsageOf(server_report_, "postgres");
  if (san_server()) {
    EXPECT_GE(client.shm_connections, 2u) << "pgbench's clients did not move to shm";
    EXPECT_GE(server.shm_connections, 2u) << "the backends' ends did not move to shm";
    EXPECT_GT(server.lines, 2u) << "the backends wrote no SAN_REPORT lines";
  } else {
    EXPECT_EQ(client.shm_connections, 0u);
    EXPECT_GE(client.tcp_connections, 3u);
  }
  if (HasFailure()) std::cerr << Contents(report_) << Contents(server_report_);
}

INSTANTIATE_TEST_SUITE_P(Real, Transparency,
                         ::testing::Values(Setup::kBothSanEager, Setup::kBothSan,
                                           Setup::kServerPlain),
                         SetupName);

}  // namespace
}  // namespace san::testing_support
