// Hostile peers of the via transport. A server must drop a connection that sends something other
// than RPC calls (over TCP and over the SAN path) and go on serving everybody else; a client whose
// server answers garbage must return an error within its timeout, never crash or hang.
#include <netinet/in.h>
#include <san/san.h>

#include <cstring>
#include <random>

#include "via_fixture.h"

namespace san::rpcvia_test {
namespace {

constexpr timeval kCallTimeout{5, 0};

void PutWord(std::vector<uint8_t>* out, uint32_t v) {
  const uint32_t be = htonl(v);
  // resize + memcpy: GCC 12 warns (a false -Wstringop-overflow) on a vector insert of 4 bytes.
  out->resize(out->size() + sizeof be);
  memcpy(out->data() + out->size() - sizeof be, &be, sizeof be);
}

void PutRecordMark(std::vector<uint8_t>* out, uint32_t length, bool last) {
  PutWord(out, length | (last ? 0x80000000u : 0));
}

// What hostile clients send: each is a whole connection's worth of bytes.
std::vector<std::vector<uint8_t>> GarbageConversations() {
  std::vector<std::vector<uint8_t>> all;
  std::mt19937 rng(11);
  std::vector<uint8_t> random(3000);
  for (uint8_t& b : random) b = static_cast<uint8_t>(rng());
  all.push_back(random);
  std::vector<uint8_t> huge_fragment;  // claims 2 GiB and stops
  PutRecordMark(&huge_fragment, 0x7fffffff, true);
  huge_fragment.resize(huge_fragment.size() + 100, 0xab);
  all.push_back(huge_fragment);
  std::vector<uint8_t> reply_not_call;  // a REPLY where a CALL belongs
  PutRecordMark(&reply_not_call, 24, true);
  for (uint32_t w : {1u, 1u /*REPLY*/, 0u, 0u, 0u, 0u}) PutWord(&reply_not_call, w);
  all.push_back(reply_not_call);
  std::vector<uint8_t> endless_fragments;  // many empty non-final fragments, then a cut
  for (int i = 0; i < 500; ++i) PutRecordMark(&endless_fragments, 0, false);
  all.push_back(endless_fragments);
  return all;
}

void ExpectServerStillServes() {
  CLIENT* c = clnt_create("127.0.0.1", VIATEST_PROG, VIATEST_VERS, "via");
  ASSERT_NE(c, nullptr) << clnt_spcreateerror("after garbage");
  char hello[] = "hello";
  char* arg = hello;
  int* len = viatest_strlen_1(&arg, c);
  ASSERT_NE(len, nullptr) << clnt_sperror(c, "after garbage");
  EXPECT_EQ(*len, 5);
  clnt_destroy(c);
}

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// Sends `bytes` on fd and closes it; with `san`, fd is a SAN socket.
void SendAndClose(int fd, const std::vector<uint8_t>& bytes, bool san) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = san ? san_send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL)
                          : send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may hang up first: that is its right
    off += static_cast<size_t>(n);
  }
  if (san) {
    san_close(fd);
  } else {
    close(fd);
  }
}

TEST_F(RpcviaTest, ServerDropsGarbageFromKernelTcpClients) {
  TestServer server("rpcvia_test_server", {});
  const sockaddr_in a = Loopback(RegisteredPort(VIATEST_PROG, VIATEST_VERS, IPPROTO_TCP));
  for (const std::vector<uint8_t>& bytes : GarbageConversations()) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
    SendAndClose(fd, bytes, false);
    ExpectServerStillServes();
  }
  EXPECT_TRUE(server.alive());
}

TEST_F(RpcviaTest, ServerDropsGarbageOverTheSanPath) {
  TestServer server("rpcvia_test_server", {});
  const sockaddr_in a = Loopback(RegisteredPort(VIATEST_PROG, VIATEST_VERS, IPPROTO_TCP));
  for (const std::vector<uint8_t>& bytes : GarbageConversations()) {
    const int fd = san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0);
    ASSERT_EQ(san_connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
    san_info info{};
    ASSERT_EQ(san_getinfo(fd, &info), 0);
    EXPECT_EQ(info.mode, SAN_MODE_SHM) << info.fallback;
    SendAndClose(fd, bytes, true);
    ExpectServerStillServes();
  }
  EXPECT_TRUE(server.alive());
}

// A "server" of our own making, registered with rpcbind under the test program's number: it
// answers every call with records that are not the reply (garbage, another xid) and then a reply
// to the right xid whose results are cut short.
class GarbageServer {
 public:
  GarbageServer() {
    listen_fd_ = san_socket(AF_INET, SOCK_SAN | SOCK_CLOEXEC, 0);
    sockaddr_in a = Loopback(0);
    EXPECT_EQ(san_bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(san_listen(listen_fd_, 4), 0);
    socklen_t len = sizeof a;
    san_getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    Unregister(VIATEST_PROG, VIATEST_VERS);
    netconfig* tcp = getnetconfigent("tcp");
    netbuf nb{sizeof a, sizeof a, &a};
    EXPECT_TRUE(rpcb_set(VIATEST_PROG, VIATEST_VERS, tcp, &nb));
    freenetconfigent(tcp);
    thread_ = std::thread([this] { Serve(); });
  }
  ~GarbageServer() {
    thread_.join();
    san_close(listen_fd_);
    Unregister(VIATEST_PROG, VIATEST_VERS);
  }

 private:
  void Serve() {
    const int fd = san_accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    uint8_t call[4096];
    size_t got = 0;
    while (got < 8) {  // record mark + xid
      const ssize_t n = san_recv(fd, call + got, sizeof call - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    uint32_t xid = 0;
    std::memcpy(&xid, call + 4, 4);
    xid = ntohl(xid);
    std::vector<uint8_t> out;
    PutRecordMark(&out, 12, true);  // not a reply message at all
    for (uint32_t w : {0xdeadbeefu, 7u, 7u}) PutWord(&out, w);
    PutRecordMark(&out, 24, true);  // an accepted reply, to another xid
    for (uint32_t w : {xid + 1, 1u, 0u, 0u, 0u, 0u}) PutWord(&out, w);
    PutRecordMark(&out, 24, true);  // the right xid, SUCCESS, and no int after it
    for (uint32_t w : {xid, 1u, 0u, 0u, 0u, 0u}) PutWord(&out, w);
    san_send(fd, out.data(), out.size(), MSG_NOSIGNAL);
    uint8_t drain[256];
    while (san_recv(fd, drain, sizeof drain, 0) > 0) {
    }
    san_close(fd);
  }

  int listen_fd_ = -1;
  std::thread thread_;
};

TEST_F(RpcviaTest, ClientSurvivesAServerAnsweringGarbage) {
  GarbageServer garbage;
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  int arg = 5;
  int result = 0;
  const auto start = std::chrono::steady_clock::now();
  const enum clnt_stat st = clnt_call(
      c, VIATEST_SLEEP_MS, reinterpret_cast<xdrproc_t>(xdr_int), reinterpret_cast<char*>(&arg),
      reinterpret_cast<xdrproc_t>(xdr_int), reinterpret_cast<char*>(&result), kCallTimeout);
  EXPECT_EQ(st, RPC_CANTDECODERES) << clnt_sperror(c, "garbage");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 4.0);
  clnt_destroy(c);  // the garbage server sees EOF and ends
}

}  // namespace
}  // namespace san::rpcvia_test
