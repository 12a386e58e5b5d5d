// End to end over real ONC RPC: a server built from one compiler's output (its skeleton and main,
// plus e2e/langtest_impl.c) and a client built from the other's (its stubs plus
// e2e/langtest_client.c, which checks every reply), over tcp and udp, found through a real rpcbind
// (started here if none is running, and stopped after). rpcinfo, a tool nobody here wrote, must
// see and ping our server too.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rpc/pmap_clnt.h>
#include <rpc/rpc.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/program.h"
#include "support/rpcbind.h"

// Under LSan: libtirpc 1.3.3 leaks 16 bytes per clnt_create() (in clnt_tp_create_timed); this
// test calls it too (see e2e/langtest_values.c). The slow unwinder lets the suppression see the
// frame inside libtirpc, which has no frame pointers.
extern "C" const char* __lsan_default_suppressions() { return "leak:clnt_tp_create_timed\n"; }
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }

namespace {

using san::testing_support::Program;
using san::testing_support::ProgramSpec;

constexpr unsigned long kProg = 0x20000101;  // LANGTEST_PROG in x/langtest.x (versions 1, 2)
constexpr unsigned long kNewstyleProg = 0x20000102;  // NEWSTYLE_PROG in x/newstyle.x (version 1)

std::string Bin(const std::string& name) { return std::string(RPCGEN_VIA_BIN_DIR) + "/" + name; }

// A server (support/program.h), stopped when the object goes: SIGTERM, waited for without limit.
// `stdin_fd`: its fd 0 (else inherited).
std::unique_ptr<Program> Spawn(const std::vector<std::string>& argv, int stdin_fd = -1) {
  ProgramSpec spec;
  spec.argv = argv;
  spec.stdin_fd = stdin_fd;
  spec.stop_signal = SIGTERM;
  spec.stop_timeout_ms = -1;
  auto program = std::make_unique<Program>(spec);
  if (!program->running()) ADD_FAILURE() << program->error();
  return program;
}

std::string Capture(const std::string& command, int* status) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return out;
}

class RpcgenViaE2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    rpcbind_ = new san::testing_support::RpcbindSession;
    ASSERT_TRUE(rpcbind_->ok()) << "rpcbind did not start";
  }

  static void TearDownTestSuite() {
    delete rpcbind_;
    rpcbind_ = nullptr;
  }

  static void Unregister(unsigned long prog = kProg) {
    for (unsigned long v : {1ul, 2ul}) {
      pmap_unset(prog, v);
      rpcb_unset(prog, v, nullptr);
    }
  }

  // Starts a server and waits until rpcbind knows its versions over udp and tcp.
  std::unique_ptr<Program> StartServer(const std::string& flavor, unsigned long prog = kProg,
                                       std::vector<unsigned long> versions = {1, 2}) {
    Unregister(prog);
    std::unique_ptr<Program> server = Spawn({Bin("rpcgen_via_e2e_server_" + flavor)});
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 200; ++i) {
      bool all = true;
      for (unsigned long v : versions) {
        for (unsigned proto : {IPPROTO_UDP, IPPROTO_TCP}) {
          all = all && pmap_getport(&a, prog, v, proto) != 0;
        }
      }
      if (all) return server;
      if (server->Exited()) {
        ADD_FAILURE() << flavor << " server exited before registering";
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << flavor << " server did not register with rpcbind";
    return nullptr;
  }

  void RunClient(const std::string& flavor, const char* nettype) {
    int status = -1;
    const std::string out = Capture(
        Bin("rpcgen_via_e2e_client_" + flavor) + " 127.0.0.1 " + nettype + " 2>&1", &status);
    EXPECT_EQ(status, 0) << flavor << " client over " << nettype << ":\n" << out;
    EXPECT_NE(out.find(" 0 failures"), std::string::npos) << out;
  }

  void Pair(const std::string& server, const std::string& client, unsigned long prog = kProg,
            std::vector<unsigned long> versions = {1, 2}) {
    std::unique_ptr<Program> running = StartServer(server, prog, versions);
    ASSERT_NE(running, nullptr);
    RunClient(client, "tcp");
    RunClient(client, "udp");
    running.reset();
    Unregister(prog);
  }

  static san::testing_support::RpcbindSession* rpcbind_;
};

san::testing_support::RpcbindSession* RpcgenViaE2e::rpcbind_ = nullptr;

TEST_F(RpcgenViaE2e, OurServerSystemClient) { Pair("via", "sys"); }
TEST_F(RpcgenViaE2e, SystemServerOurClient) { Pair("sys", "via"); }
TEST_F(RpcgenViaE2e, OurServerOurClient) { Pair("via", "via"); }
// -M (MT-safe) code from both compilers: results in caller storage, freeresult on the server.
TEST_F(RpcgenViaE2e, MtOurServerSystemClient) { Pair("via_mt", "sys_mt"); }
TEST_F(RpcgenViaE2e, MtSystemServerOurClient) { Pair("sys_mt", "via_mt"); }
// -N (several arguments, by value) and -N -M.
TEST_F(RpcgenViaE2e, NewstyleOurServerSystemClient) { Pair("via_n", "sys_n", kNewstyleProg, {1}); }
TEST_F(RpcgenViaE2e, NewstyleSystemServerOurClient) { Pair("sys_n", "via_n", kNewstyleProg, {1}); }
TEST_F(RpcgenViaE2e, NewstyleMtOurServerSystemClient) {
  Pair("via_nm", "sys_nm", kNewstyleProg, {1});
}
TEST_F(RpcgenViaE2e, NewstyleMtSystemServerOurClient) {
  Pair("sys_nm", "via_nm", kNewstyleProg, {1});
}

// The generated main() takes `-s nettype` at run time: only that transport is served, and an
// unknown nettype is a clear failure, not a server that silently serves nothing.
TEST_F(RpcgenViaE2e, RuntimeNettypeSelection) {
  Unregister();
  std::unique_ptr<Program> server = Spawn({Bin("rpcgen_via_e2e_server_via"), "-s", "tcp"});
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bool registered = false;
  for (int i = 0; i < 200 && !registered; ++i) {
    registered = pmap_getport(&a, kProg, 2, IPPROTO_TCP) != 0;
    if (!registered) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(registered);
  EXPECT_EQ(pmap_getport(&a, kProg, 1, IPPROTO_UDP), 0);
  RunClient("sys", "tcp");
  server.reset();
  Unregister();

  int status = -1;
  const std::string out = Capture(Bin("rpcgen_via_e2e_server_via") + " -s nosuchnet 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("unable to create (LANGTEST_PROG, LANGTEST_V1) for nosuchnet"),
            std::string::npos)
      << out;
  Unregister();
}

// Argument bytes sent as they are (a hostile or broken peer).
bool_t XdrRaw(XDR* x, void* p) {
  std::string* bytes = static_cast<std::string*>(p);
  return XDR_PUTBYTES(x, bytes->data(), static_cast<u_int>(bytes->size()));
}

std::vector<std::pair<std::string, std::string>> FixtureValues() {  // (type, bytes)
  int status = -1;
  std::string out = Capture(Bin("rpcgen_via_xdr_via_langtest") + " encode", &status);
  std::vector<std::pair<std::string, std::string>> values;
  size_t at = 0;
  while (at < out.size()) {
    size_t end = out.find('\n', at);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(at, end - at);
    at = end + 1;
    const size_t s1 = line.find(' '), s2 = line.rfind(' ');
    if (s1 == std::string::npos || s2 == s1) continue;
    std::string bytes;
    for (size_t i = s2 + 1; i + 1 < line.size(); i += 2) {
      bytes.push_back(static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16)));
    }
    values.emplace_back(line.substr(0, s1), bytes);
  }
  return values;
}

// Our server decodes whatever a peer sends with our XDR routines: mutated and truncated
// arguments (huge lengths, bad discriminants, short records) must be refused with an RPC error
// (GARBAGE_ARGS) while the server keeps serving. Under ASan any memory error in the generated
// decoders kills the server and fails the test. Procedures whose arguments are bounded only
// (an unbounded <> lets any peer make libtirpc allocate up to 4 GiB, with either compiler).
TEST_F(RpcgenViaE2e, HostileArgumentsAreRefusedAndTheServerSurvives) {
  struct Target {
    const char* type;
    unsigned long version, proc;
  };
  const Target targets[] = {{"point", 1, 1},  {"scalars", 1, 2}, {"node", 1, 3},
                            {"name_t", 1, 7}, {"color", 1, 8},   {"intarr", 2, 1}};
  const auto values = FixtureValues();
  ASSERT_GT(values.size(), 100u);
  std::unique_ptr<Program> server = StartServer("via");
  ASSERT_NE(server, nullptr);
  std::mt19937 rng(4242);
  int refused = 0, accepted = 0;
  for (const char* nettype : {"udp", "tcp"}) {
    CLIENT* clients[3] = {nullptr, clnt_create("127.0.0.1", kProg, 1, nettype),
                          clnt_create("127.0.0.1", kProg, 2, nettype)};
    ASSERT_NE(clients[1], nullptr);
    ASSERT_NE(clients[2], nullptr);
    for (int i = 0; i < 400; ++i) {
      const Target& t = targets[rng() % (sizeof targets / sizeof *targets)];
      std::vector<const std::string*> candidates;
      for (const auto& v : values) {
        if (v.first == t.type) candidates.push_back(&v.second);
      }
      ASSERT_FALSE(candidates.empty()) << t.type;
      std::string bytes = *candidates[rng() % candidates.size()];
      switch (rng() % 3) {
        case 0:  // a word replaced by a hostile value (lengths, discriminants, pointers flags)
          if (bytes.size() >= 4) {
            const uint32_t evil[] = {0xffffffffu, 0x7fffffffu, 0x80000000u, 1000, 2, 17};
            const uint32_t w = htonl(evil[rng() % 6]);
            memcpy(&bytes[(rng() % (bytes.size() / 4)) * 4], &w, 4);
          }
          break;
        case 1:  // truncated to a word boundary
          bytes.resize((rng() % (bytes.size() / 4 + 1)) * 4);
          break;
        default:  // random bytes flipped
          for (int k = 0; k < 3 && !bytes.empty(); ++k)
            bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
          break;
      }
      timeval timeout{10, 0};
      const clnt_stat st = clnt_call(
          clients[t.version], t.proc, reinterpret_cast<xdrproc_t>(XdrRaw),
          reinterpret_cast<caddr_t>(&bytes),
          reinterpret_cast<xdrproc_t>(reinterpret_cast<void (*)()>(xdr_void)), nullptr, timeout);
      ASSERT_TRUE(st == RPC_SUCCESS || st == RPC_CANTDECODEARGS)
          << nettype << " call " << i << " to " << t.type << ": " << clnt_sperrno(st);
      (st == RPC_SUCCESS ? accepted : refused)++;
    }
    clnt_destroy(clients[1]);
    clnt_destroy(clients[2]);
  }
  EXPECT_GT(refused, 50);
  EXPECT_GT(accepted, 50);
  ASSERT_FALSE(server->Exited()) << "the server died";
  RunClient("sys", "tcp");  // and still serves a well-behaved client
  server.reset();
  Unregister();
}

// The Makefile template (-a / -Sm) builds the sample client and server as generated.
TEST(RpcgenViaSamples, MakefileTemplateBuildsClientAndServer) {
  char tmpl[] = "/tmp/rpcgen_via_make_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  int status = -1;
  // Copies keep their times: the generated files stay newer than the .x, so make does not try to
  // run rpcgen_via from PATH.
  const std::string out = Capture("cp -p " + std::string(RPCGEN_VIA_SAMPLES_DIR) + "/* " + dir +
                                      " && cd " + dir + " && make -f Makefile.langtest 2>&1",
                                  &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(access((dir + "/langtest_client").c_str(), X_OK), 0) << out;
  EXPECT_EQ(access((dir + "/langtest_server").c_str(), X_OK), 0) << out;
  EXPECT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

bool_t XdrPoint(XDR* x, void* p) {
  int* xy = static_cast<int*>(p);
  return xdr_int(x, &xy[0]) && xdr_int(x, &xy[1]);
}

// -I: a server whose fd 0 is a connected socket (as inetd starts it) serves that socket, without
// rpcbind, and exits by itself once idle for the -K time (2 s here).
TEST_F(RpcgenViaE2e, InetdModeServesFdZeroAndClosesDown) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  std::unique_ptr<Program> server = Spawn({Bin("rpcgen_via_e2e_server_inetd")}, sv[1]);
  close(sv[1]);
  sockaddr_storage peer{};
  netbuf address{sizeof peer, sizeof peer, &peer};
  CLIENT* c = clnt_vc_create(sv[0], &address, kProg, 1, 0, 0);
  ASSERT_NE(c, nullptr) << clnt_spcreateerror("clnt_vc_create");
  int xy[2] = {30, 12};
  int sum = 0;
  timeval timeout{10, 0};
  EXPECT_EQ(
      clnt_call(c, 1, reinterpret_cast<xdrproc_t>(XdrPoint), reinterpret_cast<caddr_t>(xy),
                reinterpret_cast<xdrproc_t>(xdr_int), reinterpret_cast<caddr_t>(&sum), timeout),
      RPC_SUCCESS);
  EXPECT_EQ(sum, 42);
  clnt_destroy(c);
  close(sv[0]);
  const int status = server->WaitStatus(20000);  // closedown is 2 s; allow a loaded machine 20 s
  ASSERT_GE(status, 0) << "the inetd-mode server did not exit after its closedown time";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST_F(RpcgenViaE2e, RpcinfoSeesAndPingsOurServer) {
  std::unique_ptr<Program> server = StartServer("via");
  ASSERT_NE(server, nullptr);
  int status = -1;
  const std::string list = Capture("rpcinfo -p 127.0.0.1 2>&1", &status);
  EXPECT_EQ(status, 0) << list;
  EXPECT_NE(list.find(std::to_string(kProg) + "    1   tcp"), std::string::npos) << list;
  EXPECT_NE(list.find(std::to_string(kProg) + "    2   udp"), std::string::npos) << list;
  for (const char* how : {"-t", "-u"}) {
    const std::string ping = Capture(
        std::string("rpcinfo ") + how + " 127.0.0.1 " + std::to_string(kProg) + " 2 2>&1", &status);
    EXPECT_EQ(status, 0) << ping;
    EXPECT_NE(ping.find("version 2 ready and waiting"), std::string::npos) << ping;
  }
  server.reset();
  Unregister();
}

}  // namespace
