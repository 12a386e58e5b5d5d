// san_upgrade(): an established kernel TCP connection (made with plain socket calls, as inetd
// would hand one over) moves to shm when both ends call it; declines cleanly otherwise, leaving
// the TCP connection usable.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <string>

#include <gtest/gtest.h>

#include "san/san.h"
#include "sanlib/proto/upgrade_wire.h"
#include "support/inet.h"

namespace {

// A connected pair of plain kernel TCP sockets on loopback: *a connected, *b accepted.
void TcpPair(int* a, int* b) {
  ASSERT_TRUE(san::testing_support::KernelTcpPair(a, b)) << strerror(errno);
}

int Mode(int fd) {
  san_info info{};
  return san_getinfo(fd, &info) == 0 ? info.mode : -1;
}

TEST(Upgrade, BothEndsMoveToShmAndDataFlows) {
  int a, b;
  TcpPair(&a, &b);
  // Bytes sent over TCP before the upgrade are read before it, as a protocol would.
  ASSERT_EQ(send(a, "pre", 3, 0), 3);
  char pre[3];
  ASSERT_EQ(recv(b, pre, 3, MSG_WAITALL), 3);
  auto other = std::async(std::launch::async, [b] { return san_upgrade(b); });
  ASSERT_EQ(san_upgrade(a), 0) << strerror(errno);
  ASSERT_EQ(other.get(), 0);
  EXPECT_EQ(Mode(a), SAN_MODE_SHM);
  EXPECT_EQ(Mode(b), SAN_MODE_SHM);
  EXPECT_EQ(san_upgrade(a), 0);  // already upgraded: nothing to do
  const std::string msg(100000, 'x');
  auto reader = std::async(std::launch::async, [b, n = msg.size()] {
    std::string got(n, '\0');
    ssize_t r = san_recv(b, got.data(), n, MSG_WAITALL);
    return r == static_cast<ssize_t>(n) ? got : std::string();
  });
  ASSERT_EQ(san_send(a, msg.data(), msg.size(), 0), static_cast<ssize_t>(msg.size()));
  EXPECT_EQ(reader.get(), msg);
  ASSERT_EQ(san_send(b, "back", 4, 0), 4);
  char back[4];
  ASSERT_EQ(san_recv(a, back, 4, MSG_WAITALL), 4);
  EXPECT_EQ(std::string(back, 4), "back");
  ASSERT_EQ(san_close(a), 0);
  char c;
  EXPECT_EQ(san_recv(b, &c, 1, 0), 0);  // orderly close carried over SAN
  san_close(b);
}

TEST(Upgrade, PeerThatDeclinesLeavesTcpWorking) {
  int a, b;
  TcpPair(&a, &b);
  // The peer answers with a hello that offers no shm (e.g. SAN_PROVIDER=off there).
  std::byte hello[san::proto::UpgradeHello::kSize];
  san::proto::EncodeUpgradeHello(san::proto::UpgradeHello{}, hello);
  ASSERT_EQ(send(b, hello, sizeof hello, 0), static_cast<ssize_t>(sizeof hello));
  errno = 0;
  EXPECT_EQ(san_upgrade(a), -1);
  EXPECT_EQ(errno, ENOTSUP);
  EXPECT_EQ(Mode(a), SAN_MODE_TCP);
  std::byte theirs[sizeof hello];
  ASSERT_EQ(recv(b, theirs, sizeof theirs, MSG_WAITALL), static_cast<ssize_t>(sizeof theirs));
  EXPECT_TRUE(san::proto::DecodeUpgradeHello(theirs, sizeof theirs).ok());
  // Exactly the hellos were consumed: the byte stream carries on over TCP.
  ASSERT_EQ(san_send(a, "tcp", 3, 0), 3);
  char got[3];
  ASSERT_EQ(recv(b, got, 3, MSG_WAITALL), 3);
  EXPECT_EQ(std::string(got, 3), "tcp");
  san_close(a);
  close(b);
}

TEST(Upgrade, PeerNotSpeakingTheProtocolIsAnError) {
  int a, b;
  TcpPair(&a, &b);
  const std::string junk(san::proto::UpgradeHello::kSize, 'J');
  ASSERT_EQ(send(b, junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
  EXPECT_EQ(san_upgrade(a), -1);
  EXPECT_EQ(errno, EPROTO);
  san_close(a);
  close(b);
}

TEST(Upgrade, PeerThatHangsUpIsAnError) {
  int a, b;
  TcpPair(&a, &b);
  close(b);
  EXPECT_EQ(san_upgrade(a), -1);
  EXPECT_TRUE(errno == ECONNRESET || errno == EPIPE) << strerror(errno);
  san_close(a);
}

TEST(Upgrade, RejectsWhatIsNotAConnectedStream) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  EXPECT_EQ(san_upgrade(p[0]), -1);
  EXPECT_EQ(errno, ENOTSOCK);
  close(p[0]);
  close(p[1]);
  EXPECT_EQ(san_upgrade(-1), -1);
  EXPECT_EQ(errno, EBADF);
  const int unconnected = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(san_upgrade(unconnected), -1);
  EXPECT_EQ(errno, ENOTCONN);
  close(unconnected);
}

TEST(UpgradeWire, RoundTripsAndRejectsCorruption) {
  san::proto::UpgradeHello h;
  h.flags = san::proto::UpgradeHello::kFlagShm;
  h.netns_inode = 0x1234567890ull;
  h.boot_id = 42;
  std::byte buf[san::proto::UpgradeHello::kSize];
  san::proto::EncodeUpgradeHello(h, buf);
  auto back = san::proto::DecodeUpgradeHello(buf, sizeof buf);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(san::proto::SameHost(h, back.value()));
  EXPECT_FALSE(san::proto::DecodeUpgradeHello(buf, sizeof buf - 1).ok());
  for (size_t i : {0, 7, 12}) {
    std::byte bad[sizeof buf];
    memcpy(bad, buf, sizeof buf);
    bad[i] ^= std::byte{0x40};
    EXPECT_FALSE(san::proto::DecodeUpgradeHello(bad, sizeof bad).ok()) << i;
  }
  san::proto::UpgradeOffer o;
  o.rendezvous.sin_port = htons(4000);
  o.rendezvous.sin_addr.s_addr = htonl(0x7f010203);
  std::byte ob[san::proto::UpgradeOffer::kSize];
  san::proto::EncodeUpgradeOffer(o, ob);
  auto ob_back = san::proto::DecodeUpgradeOffer(ob, sizeof ob);
  ASSERT_TRUE(ob_back.ok());
  EXPECT_EQ(ob_back->rendezvous.sin_port, htons(4000));
  EXPECT_EQ(ob_back->rendezvous.sin_addr.s_addr, htonl(0x7f010203));
  o.rendezvous.sin_port = 0;  // an offer without a port is malformed
  san::proto::EncodeUpgradeOffer(o, ob);
  EXPECT_FALSE(san::proto::DecodeUpgradeOffer(ob, sizeof ob).ok());
  san::proto::UpgradeResult r;
  r.status = -5;
  std::byte rb[san::proto::UpgradeResult::kSize];
  san::proto::EncodeUpgradeResult(r, rb);
  EXPECT_FALSE(san::proto::DecodeUpgradeResult(rb, sizeof rb).ok());
}

}  // namespace
