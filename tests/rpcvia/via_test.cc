// The via transport end to end: clnt_create(host, PROG, VERS, "via") against servers built from
// rpcgen_via's output, found through the real rpcbind; the other nettypes unchanged; fallback to
// TCP (and refusing it); timeouts, a server dying mid-call, clnt_control, errors and their text.
#include <san/san.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>

#include "via_fixture.h"

// libtirpc 1.3.3 leaks 16 bytes per clnt_create() of its own nettypes (in clnt_tp_create_timed).
extern "C" const char* __lsan_default_suppressions() { return "leak:clnt_tp_create_timed\n"; }
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }

namespace san::rpcvia_test {

testing_support::RpcbindSession* RpcviaTest::rpcbind_ = nullptr;

namespace {

constexpr timeval kCallTimeout{10, 0};

std::string RunCommand(const std::string& command, int* status) {
  std::string out;
  if (FILE* p = popen((command + " 2>&1").c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = pclose(p);
    *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }
  return out;
}

enum clnt_stat CallInt(CLIENT* c, rpcproc_t proc, int arg, int* result, timeval timeout) {
  return clnt_call(c, proc, reinterpret_cast<xdrproc_t>(xdr_int), reinterpret_cast<char*>(&arg),
                   reinterpret_cast<xdrproc_t>(xdr_int), reinterpret_cast<char*>(result), timeout);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST_F(RpcviaTest, ViaCallsRunOverSharedMemory) {
  TestServer server("rpcvia_test_server", {});
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(Mode(c), SAN_MODE_SHM);
  EXPECT_STREQ(rpcvia_create_detail(), "");
  EXPECT_STREQ(c->cl_netid, "via");
  EXPECT_EQ(Path(c), "shm");  // the server's side of the connection says so too
  EXPECT_NE(viatest_null_1(nullptr, c), nullptr);
  for (int i = 0; i < 2000; ++i) {
    std::string s(static_cast<size_t>(i % 300), 'x');
    char* arg = s.data();
    int* len = viatest_strlen_1(&arg, c);
    ASSERT_NE(len, nullptr) << clnt_sperror(c, "strlen");
    ASSERT_EQ(*len, i % 300);
  }
  clnt_destroy(c);
}

TEST_F(RpcviaTest, LargeRecordsArriveByteExact) {
  TestServer server("rpcvia_test_server", {});
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  std::mt19937 rng(7);
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{3999}, size_t{4000}, size_t{65537}, size_t{1} << 20}) {
    std::vector<char> data(size);
    for (char& b : data) b = static_cast<char>(rng());
    viatest_blob arg{static_cast<u_int>(size), data.data()};
    viatest_blob* echoed = viatest_echo_1(&arg, c);
    ASSERT_NE(echoed, nullptr) << size << ": " << clnt_sperror(c, "echo") << "\nserver log:\n"
                               << server.Log();
    ASSERT_EQ(echoed->viatest_blob_len, size);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), echoed->viatest_blob_val)) << size;
    clnt_freeres(c, reinterpret_cast<xdrproc_t>(xdr_viatest_blob), reinterpret_cast<char*>(echoed));
  }
  clnt_destroy(c);
}

TEST_F(RpcviaTest, OtherNettypesStayLibtirpcs) {
  TestServer server("rpcvia_test_server", {});
  for (const char* nettype : {"tcp", "udp"}) {
    CLIENT* c = Create(nettype);
    ASSERT_NE(c, nullptr);
    EXPECT_STREQ(c->cl_netid, nettype);
    // The tcp client reaches the via listener (the program's tcp address) and is served over TCP.
    EXPECT_EQ(Path(c), nettype);
    clnt_destroy(c);
  }
}

TEST_F(RpcviaTest, RpcinfoListsAndPingsTheServer) {
  TestServer server("rpcvia_test_server", {});
  int status = -1;
  const std::string prog = std::to_string(VIATEST_PROG);
  const std::string list = RunCommand("rpcinfo -p 127.0.0.1", &status);
  EXPECT_EQ(status, 0) << list;
  EXPECT_NE(list.find(prog + "    1   tcp"), std::string::npos) << list;
  EXPECT_NE(list.find(prog + "    1   udp"), std::string::npos) << list;
  for (const char* flag : {"-t", "-u"}) {
    const std::string out =
        RunCommand(std::string("rpcinfo ") + flag + " 127.0.0.1 " + prog + " 1", &status);
    EXPECT_EQ(status, 0) << out;
    EXPECT_NE(out.find("ready and waiting"), std::string::npos) << out;
  }
}

TEST_F(RpcviaTest, ServerSelectsViaAloneWithDashS) {
  TestServer server("rpcvia_test_server", {"-s", "via"}, /*udp=*/false);
  EXPECT_EQ(RegisteredPort(VIATEST_PROG, VIATEST_VERS, IPPROTO_UDP), 0);
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(Path(c), "shm");
  clnt_destroy(c);
  c = Create("tcp");  // a plain TCP client of the via-only server
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(Path(c), "tcp");
  clnt_destroy(c);
}

TEST_F(RpcviaTest, PlainServerMeansTcpFallback) {
  TestServer server("rpcvia_test_server_plain", {});
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(Mode(c), SAN_MODE_TCP);
  EXPECT_NE(std::string(rpcvia_create_detail()).find("TCP fallback"), std::string::npos)
      << rpcvia_create_detail();
  EXPECT_EQ(Path(c), "tcp");
  char hello[] = "hello";
  char* arg = hello;
  int* len = viatest_strlen_1(&arg, c);
  ASSERT_NE(len, nullptr);
  EXPECT_EQ(*len, 5);
  clnt_destroy(c);
}

TEST_F(RpcviaTest, FallbackCanBeRefused) {
  TestServer server("rpcvia_test_server_plain", {});
  rpcvia_set_fallback(RPCVIA_FALLBACK_FAIL);
  CLIENT* c = clnt_create("127.0.0.1", VIATEST_PROG, VIATEST_VERS, "via");
  EXPECT_EQ(c, nullptr);
  EXPECT_EQ(rpc_createerr.cf_stat, RPC_SYSTEMERROR);
  EXPECT_EQ(rpc_createerr.cf_error.re_errno, EPROTONOSUPPORT);
  EXPECT_NE(std::string(clnt_spcreateerror("x")).find("Protocol not supported"), std::string::npos);
  EXPECT_NE(std::string(rpcvia_create_detail()).find("TCP fallback"), std::string::npos);
  if (c) clnt_destroy(c);
}

TEST_F(RpcviaTest, TimeoutIsRpcTimedoutAndTheLateReplyIsSkipped) {
  TestServer server("rpcvia_test_server", {});
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  int result = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(CallInt(c, VIATEST_SLEEP_MS, 1500, &result, timeval{0, 200000}), RPC_TIMEDOUT);
  EXPECT_LT(SecondsSince(start), 1.2);
  EXPECT_NE(std::string(clnt_sperror(c, "sleep")).find("Timed out"), std::string::npos);
  // The next call's reply comes after the stale one, which must not be taken for it.
  EXPECT_EQ(CallInt(c, VIATEST_SLEEP_MS, 7, &result, kCallTimeout), RPC_SUCCESS);
  EXPECT_EQ(result, 7);
  // CLSET_TIMEOUT overrides the per-call timeout.
  const timeval short_wait{0, 100000};
  ASSERT_TRUE(
      clnt_control(c, CLSET_TIMEOUT, reinterpret_cast<char*>(const_cast<timeval*>(&short_wait))));
  EXPECT_EQ(CallInt(c, VIATEST_SLEEP_MS, 1000, &result, kCallTimeout), RPC_TIMEDOUT);
  clnt_destroy(c);
}

TEST_F(RpcviaTest, ServerDeathMidCallIsAnErrorNotAHang) {
  TestServer server("rpcvia_test_server", {});
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  int result = 0;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(CallInt(c, VIATEST_EXIT, 3, &result, kCallTimeout), RPC_CANTRECV);
  EXPECT_LT(SecondsSince(start), 5.0);
  EXPECT_NE(std::string(clnt_sperror(c, "exit")).find("Unable to receive"), std::string::npos)
      << clnt_sperror(c, "exit");
  // The connection is gone for good: later calls fail at once.
  EXPECT_EQ(CallInt(c, VIATEST_SLEEP_MS, 1, &result, kCallTimeout), RPC_CANTSEND);
  clnt_destroy(c);
  server.Reap();
}

TEST_F(RpcviaTest, CreateErrorsSayWhatWentWrong) {
  Unregister(VIATEST_PROG, VIATEST_VERS);
  EXPECT_EQ(clnt_create("127.0.0.1", VIATEST_PROG, VIATEST_VERS, "via"), nullptr);
  EXPECT_EQ(rpc_createerr.cf_stat, RPC_PROGNOTREGISTERED);
  EXPECT_NE(std::string(clnt_spcreateerror("h")).find("Program not registered"), std::string::npos);
  EXPECT_EQ(clnt_create("no-such-host.invalid", VIATEST_PROG, VIATEST_VERS, "via"), nullptr);
  EXPECT_EQ(rpc_createerr.cf_stat, RPC_UNKNOWNHOST);
  // Nettypes other than "via" go to libtirpc, errors included.
  EXPECT_EQ(clnt_create("127.0.0.1", VIATEST_PROG, VIATEST_VERS, "no-such-nettype"), nullptr);
  EXPECT_EQ(rpc_createerr.cf_stat, RPC_UNKNOWNPROTO);
}

TEST_F(RpcviaTest, CreateTimedHonoursItsTimeout) {
  TestServer server("rpcvia_test_server", {});
  const timeval generous{5, 0};
  CLIENT* c = clnt_create_timed("127.0.0.1", VIATEST_PROG, VIATEST_VERS, "via", &generous);
  ASSERT_NE(c, nullptr) << clnt_spcreateerror("timed");
  clnt_destroy(c);
  const timeval none{0, 1};
  c = clnt_create_timed("127.0.0.1", VIATEST_PROG, VIATEST_VERS, "via", &none);
  EXPECT_EQ(c, nullptr);
  EXPECT_TRUE(rpc_createerr.cf_stat == RPC_TIMEDOUT || rpc_createerr.cf_stat == RPC_RPCBFAILURE)
      << clnt_spcreateerror("timed");
  if (c) clnt_destroy(c);
}

TEST_F(RpcviaTest, ClntControl) {
  TestServer server("rpcvia_test_server", {});
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  int fd = -1;
  ASSERT_TRUE(clnt_control(c, CLGET_FD, reinterpret_cast<char*>(&fd)));
  EXPECT_EQ(san_is_socket(fd), 1);
  sockaddr_in server_addr{};
  ASSERT_TRUE(clnt_control(c, CLGET_SERVER_ADDR, reinterpret_cast<char*>(&server_addr)));
  EXPECT_EQ(ntohs(server_addr.sin_port), RegisteredPort(VIATEST_PROG, VIATEST_VERS, IPPROTO_TCP));
  netbuf svc{};
  ASSERT_TRUE(clnt_control(c, CLGET_SVC_ADDR, reinterpret_cast<char*>(&svc)));
  EXPECT_EQ(svc.len, sizeof(sockaddr_in));
  timeval tv{3, 500};
  ASSERT_TRUE(clnt_control(c, CLSET_TIMEOUT, reinterpret_cast<char*>(&tv)));
  timeval got{};
  ASSERT_TRUE(clnt_control(c, CLGET_TIMEOUT, reinterpret_cast<char*>(&got)));
  EXPECT_EQ(got.tv_sec, 3);
  EXPECT_EQ(got.tv_usec, 500);
  timeval bad{1, 2000000};
  EXPECT_FALSE(clnt_control(c, CLSET_TIMEOUT, reinterpret_cast<char*>(&bad)));
  u_int32_t value = 0;
  ASSERT_TRUE(clnt_control(c, CLGET_PROG, reinterpret_cast<char*>(&value)));
  EXPECT_EQ(value, VIATEST_PROG);
  u_int32_t xid = 0x1234;
  ASSERT_TRUE(clnt_control(c, CLSET_XID, reinterpret_cast<char*>(&xid)));
  EXPECT_NE(viatest_null_1(nullptr, c), nullptr);
  ASSERT_TRUE(clnt_control(c, CLGET_XID, reinterpret_cast<char*>(&value)));
  EXPECT_EQ(value, 0x1234u);  // the call went out with the xid we set
  EXPECT_FALSE(clnt_control(c, 0x7fff, reinterpret_cast<char*>(&value)));
  // Another version: the server's answer becomes the client's error.
  u_int32_t vers = 2;
  ASSERT_TRUE(clnt_control(c, CLSET_VERS, reinterpret_cast<char*>(&vers)));
  EXPECT_EQ(viatest_null_1(nullptr, c), nullptr);
  rpc_err err{};
  clnt_geterr(c, &err);
  EXPECT_EQ(err.re_status, RPC_PROGVERSMISMATCH);
  EXPECT_EQ(err.re_vers.low, 1u);
  EXPECT_EQ(err.re_vers.high, 1u);
  // CLSET_FD_NCLOSE: the socket outlives the CLIENT.
  ASSERT_TRUE(clnt_control(c, CLSET_FD_NCLOSE, nullptr));
  clnt_destroy(c);
  EXPECT_EQ(san_is_socket(fd), 1);
  EXPECT_EQ(san_close(fd), 0);
}

TEST_F(RpcviaTest, ThreadsShareOneClient) {
  TestServer server("rpcvia_test_server", {});
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const int want = t * 1000 + i;
        int got = -1;
        if (CallInt(c, VIATEST_SLEEP_MS, 0, &got, kCallTimeout) != RPC_SUCCESS || got != 0) ++wrong;
        std::string s(static_cast<size_t>(want % 97), 'y');
        char* arg = s.data();
        int len = -1;
        if (clnt_call(c, VIATEST_STRLEN, reinterpret_cast<xdrproc_t>(xdr_wrapstring),
                      reinterpret_cast<char*>(&arg), reinterpret_cast<xdrproc_t>(xdr_int),
                      reinterpret_cast<char*>(&len), kCallTimeout) != RPC_SUCCESS ||
            len != want % 97) {
          ++wrong;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  clnt_destroy(c);
}

}  // namespace
}  // namespace san::rpcvia_test
