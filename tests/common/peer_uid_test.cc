// Peer uid (common/peer_uid.h): the same-host rule on addresses (pure), and the inet_diag
// lookup on a real loopback TCP connection of this process (kernel sockets, no sanlib).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sanlib/common/peer_uid.h"
#include "sanlib/common/unique_fd.h"

namespace san {
namespace {

sockaddr_storage V4(const char* addr, uint16_t port) {
  sockaddr_storage ss{};
  auto* in = reinterpret_cast<sockaddr_in*>(&ss);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, addr, &in->sin_addr), 1) << addr;
  return ss;
}

sockaddr_storage V6(const char* addr, uint16_t port) {
  sockaddr_storage ss{};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1) << addr;
  return ss;
}

TEST(PeerUid, SameHostRule) {
  EXPECT_TRUE(PeerIsOnThisHost(V4("127.0.0.1", 7467), V4("127.0.0.1", 40000)));
  EXPECT_TRUE(PeerIsOnThisHost(V4("127.0.0.2", 7467), V4("127.0.0.9", 40000)));
  EXPECT_TRUE(PeerIsOnThisHost(V4("10.0.0.1", 7467), V4("10.0.0.1", 40000)));   // own address
  EXPECT_FALSE(PeerIsOnThisHost(V4("10.0.0.1", 7467), V4("10.0.0.2", 40000)));  // another host
  EXPECT_FALSE(PeerIsOnThisHost(V4("127.0.0.1", 7467), V4("128.0.0.1", 40000)));
  EXPECT_TRUE(PeerIsOnThisHost(V6("::1", 7467), V6("::1", 40000)));
  EXPECT_TRUE(PeerIsOnThisHost(V6("fd00::1", 7467), V6("fd00::1", 40000)));
  EXPECT_FALSE(PeerIsOnThisHost(V6("fd00::1", 7467), V6("fd00::2", 40000)));
  // IPv4-mapped on a dual-stack listener is IPv4.
  EXPECT_TRUE(PeerIsOnThisHost(V6("::ffff:127.0.0.1", 7467), V6("::ffff:127.0.0.5", 40000)));
  EXPECT_FALSE(PeerIsOnThisHost(V6("::ffff:10.0.0.1", 7467), V6("::ffff:10.0.0.2", 40000)));
  EXPECT_FALSE(PeerIsOnThisHost(V4("127.0.0.1", 7467), V6("::1", 40000)));  // families differ
  sockaddr_storage unix_addr{};
  unix_addr.ss_family = AF_UNIX;
  EXPECT_FALSE(PeerIsOnThisHost(unix_addr, unix_addr));
  // A remote peer is not even looked up.
  Result<uid_t> remote = LookupPeerUid(V4("10.0.0.1", 7467), V4("10.0.0.2", 40000));
  ASSERT_FALSE(remote.ok());
  EXPECT_EQ(remote.status().code(), EPERM);
}

// A loopback connection made here: the accepted socket's peer is our own client socket, owned by
// our effective uid. Once the client is closed and gone, the lookup finds nothing.
void LookupOverLoopback(int family, const char* addr) {
  UniqueFd listener(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.valid());
  sockaddr_storage bind_addr = family == AF_INET ? V4(addr, 0) : V6(addr, 0);
  socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&bind_addr), len) != 0) {
    GTEST_SKIP() << addr << " not available here";
  }
  ASSERT_EQ(listen(listener.get(), 1), 0);
  sockaddr_storage server{};
  len = sizeof server;
  ASSERT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&server), &len), 0);
  UniqueFd client(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(connect(client.get(), reinterpret_cast<sockaddr*>(&server), len), 0);
  UniqueFd accepted(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted.valid());
  sockaddr_storage local{}, peer{};
  socklen_t llen = sizeof local, plen = sizeof peer;
  ASSERT_EQ(getsockname(accepted.get(), reinterpret_cast<sockaddr*>(&local), &llen), 0);
  ASSERT_EQ(getpeername(accepted.get(), reinterpret_cast<sockaddr*>(&peer), &plen), 0);
  Result<uid_t> uid = LookupPeerUid(local, peer);
  ASSERT_TRUE(uid.ok()) << uid.status().ToString();
  EXPECT_EQ(*uid, geteuid());
  // Asked the other way round (our own end as the "peer"), it finds our accepted socket: also
  // ours. What matters is that the 4-tuple is exact: a port nobody uses finds nothing.
  sockaddr_storage nobody_port = peer;
  if (family == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&nobody_port)->sin_port = htons(1);
  } else {
    reinterpret_cast<sockaddr_in6*>(&nobody_port)->sin6_port = htons(1);
  }
  Result<uid_t> none = LookupPeerUid(local, nobody_port);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), ENOENT) << none.status().ToString();
}

TEST(PeerUid, LookupFindsTheOwnerOfALoopbackPeerV4) { LookupOverLoopback(AF_INET, "127.0.0.1"); }
TEST(PeerUid, LookupFindsTheOwnerOfALoopbackPeerV6) { LookupOverLoopback(AF_INET6, "::1"); }

// An IPv4 client of a dual-stack listener ([::], IPV6_V6ONLY off): the server's end is an IPv6
// socket whose peer is ::ffff:127.0.0.1, while sanlib names the connection by its unmapped
// (canonical) IPv4 addresses. The lookup by those finds it, established, still in the accept
// queue: the connection thread's check of a channel whose client is gone relies on it.
TEST(PeerUid, LookupFindsADualStackConnectionByItsIpv4Addresses) {
  UniqueFd listener(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.valid());
  const int off = 0;
  ASSERT_EQ(setsockopt(listener.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off), 0);
  sockaddr_storage any = V6("::", 0);
  if (bind(listener.get(), reinterpret_cast<sockaddr*>(&any), sizeof(sockaddr_in6)) != 0) {
    GTEST_SKIP() << "no IPv6 here";
  }
  ASSERT_EQ(listen(listener.get(), 1), 0);
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ASSERT_EQ(getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &len), 0);
  const uint16_t port = ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  UniqueFd client(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_storage server = V4("127.0.0.1", port);
  ASSERT_EQ(connect(client.get(), reinterpret_cast<sockaddr*>(&server), sizeof(sockaddr_in)), 0);
  sockaddr_storage client_addr{};
  len = sizeof client_addr;
  ASSERT_EQ(getsockname(client.get(), reinterpret_cast<sockaddr*>(&client_addr), &len), 0);
  // Still in the accept queue: the server's end of the connection.
  Result<TcpSocketFacts> queued = LookupTcpSocket(server, client_addr);
  ASSERT_TRUE(queued.ok()) << queued.status().ToString();
  EXPECT_EQ(queued->state, TCP_ESTABLISHED);
}

}  // namespace
}  // namespace san
