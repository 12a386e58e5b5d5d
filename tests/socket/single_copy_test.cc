// Single copy over real processes (docs/protocol.md "Single copy"): a receiver blocked in recv()
// exposes its buffer and the sender process_vm_writev's into it. Bytes are checked for many sizes
// and iovec shapes (recv, readv, MSG_WAITALL, a buffer smaller than the message, MSG_PEEK), the
// fallback where the kernel refuses process_vm_* (a seccomp filter, which binds root too) at
// set-up and mid-connection, a receive timeout with a window out, two peers that both send before
// receiving, and a sender SIGKILLed while streaming.
//
// Determinism: the parent is the receiver; a reader thread blocks in recv() while the main thread
// waits until the stream has posted its ADVERT (white-box: Stream::Stats), and only then tells the
// sending child (over a pipe) to send. The ADVERT is then in the child's ring before its send.
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "../fabric/seccomp_util.h"
#include "robust_util.h"
#include "sanlib/socket/runtime.h"

// Fork children start sanlib's threads (as in fork_test.cc): let them under ThreadSanitizer.
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }

namespace san::testing {
namespace {

// Single copy is off by default (docs/fabric.md): these tests turn it on before sanlib reads its
// configuration (on first use, after static initialisation).
const bool kSingleCopyOn = setenv("SAN_SINGLE_COPY", "on", 1) == 0;

constexpr int kNoToken = 60, kSendFailed = 61, kSeccompFailed = 62, kConnectFailed = 63,
              kRecvFailed = 64;

proto::StreamStats StatsOf(int fd) { return Runtime::Get().table().Find(fd)->stream->Stats(); }

// Waits until `fd` has offered more than `before` windows (the reader is waiting in one).
bool WaitOffer(int fd, uint64_t before) {
  return WaitUntil([&] { return StatsOf(fd).windows_offered > before; }, 5000, 1);
}

// Sends stream bytes [pos, pos+len) as one writev of up to three pieces.
bool WritevPattern(int fd, uint64_t pos, size_t len) {
  const uint8_t* p = Pattern::Get().View(pos);
  const size_t a = len / 3, b = len / 5;
  iovec iov[3] = {{const_cast<uint8_t*>(p), a},
                  {const_cast<uint8_t*>(p + a), b},
                  {const_cast<uint8_t*>(p + a + b), len - a - b}};
  size_t done = 0;
  while (done < len) {
    ssize_t n = san_writev(fd, iov, 3);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
    // A blocking writev takes everything or fails; a short one would need re-slicing.
    if (done < len) return false;
  }
  return true;
}

// A connected pair: the child runs `sender(fd, tokens)` on its end; the parent gets its end.
struct Link {
  int listener = -1;
  int fd = -1;
  Channel tokens;  // parent -> child: "send the next message"
  Child child;
  ~Link() {
    if (fd >= 0) san_close(fd);
    if (listener >= 0) san_close(listener);
  }
};

void Open(Link* link, const std::function<int(int fd, Channel& tokens)>& sender,
          bool deny_process_vm = false) {
  uint16_t port = 0;
  link->listener = SanListener(&port);
  ASSERT_GE(link->listener, 0);
  link->child.Start([&, port, deny_process_vm] {
    if (deny_process_vm && !DenyProcessVm()) return kSeccompFailed;
    const int fd = SanConnect(port);
    if (fd < 0) return kConnectFailed;
    const int rc = sender(fd, link->tokens);
    san_close(fd);
    return rc;
  });
  link->fd = san_accept(link->listener, nullptr, nullptr);
  ASSERT_GE(link->fd, 0);
  ASSERT_TRUE(IsShm(link->fd));
}

// Reads exactly `len` pattern bytes starting at `pos` with the given shape of recv call; false on
// an error, EOF or a wrong byte.
enum class Shape { kRecv, kReadv, kWaitAll, kSmallBuffer };
bool ReadMessage(int fd, uint64_t pos, size_t len, Shape shape) {
  std::vector<uint8_t> buf(len + 4096);
  size_t got = 0;
  while (got < len) {
    ssize_t n;
    switch (shape) {
      case Shape::kReadv: {
        // Never more than the message: the next one may already be queued.
        const size_t left = len - got;
        const size_t first = std::min(left, std::max<size_t>(65536, left / 2));
        const size_t second = std::min<size_t>(1000, left - first);
        iovec iov[3] = {{buf.data(), first},
                        {buf.data() + first, second},
                        {buf.data() + first + second, left - first - second}};
        n = san_readv(fd, iov, 3);
        break;
      }
      case Shape::kWaitAll:
        n = san_recv(fd, buf.data(), len - got, MSG_WAITALL);
        break;
      case Shape::kSmallBuffer:
        n = san_recv(fd, buf.data(), std::min<size_t>(70000, len - got), 0);
        break;
      default:
        n = san_recv(fd, buf.data(), len - got, 0);
        break;
    }
    if (n <= 0) {
      fprintf(stderr, "ReadMessage: recv returned %zd (%s) after %zu of %zu\n", n, strerror(errno),
              got, len);
      return false;
    }
    if (got + static_cast<size_t>(n) > len) return false;
    if (!Pattern::Get().Check(pos + got, buf.data(), static_cast<size_t>(n))) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// The sending child's loop: for each size, wait for the token, then send it (send or writev).
int SendOnTokens(int fd, Channel& tokens, const std::vector<size_t>& sizes, bool first_untokened,
                 const std::function<void(size_t)>& before_each = nullptr) {
  uint64_t pos = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (before_each) before_each(i);
    if (i > 0 || !first_untokened) {
      char t;
      if (!tokens.Get(&t, 10000)) return kNoToken;
    }
    const bool ok =
        i % 2 ? WritevPattern(fd, pos, sizes[i]) : SendPattern(fd, pos, sizes[i]) == sizes[i];
    if (!ok) return kSendFailed;
    pos += sizes[i];
  }
  return 0;
}

// A link whose child sends `sizes`, the first at once and each other on a token, with the first
// message (which primes the receiver to offer windows) already read here.
void OpenPrimed(Link* link, const std::vector<size_t>& sizes) {
  ASSERT_NO_FATAL_FAILURE(Open(link, [&](int fd, Channel& tokens) {
    return SendOnTokens(fd, tokens, sizes, /*first_untokened=*/true);
  }));
  ASSERT_TRUE(ReadMessage(link->fd, 0, sizes[0], Shape::kRecv));
}

TEST(SocketSingleCopy, ManySizesAndShapesArriveIntactByOneCopy) {
  Watchdog dog(60);
  ASSERT_TRUE(kSingleCopyOn);
  ASSERT_TRUE(Runtime::Get().config().single_copy);
  // The first message primes the receiver (it offers windows only to a peer that sends big).
  const std::vector<size_t> sizes = {100000,  65536,  65537,  100000, 262144, 1 << 20,
                                     3000007, 131072, 500000, 65536,  777777, 1000000};
  Link link;
  ASSERT_NO_FATAL_FAILURE(Open(&link, [&](int fd, Channel& tokens) {
    return SendOnTokens(fd, tokens, sizes, /*first_untokened=*/true);
  }));
  uint64_t pos = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(i);
    const Shape shape = static_cast<Shape>(i % 4);
    const uint64_t offered = StatsOf(link.fd).windows_offered;
    std::atomic<bool> ok{false};
    std::thread reader([&] { ok = ReadMessage(link.fd, pos, sizes[i], shape); });
    if (i > 0) {
      EXPECT_TRUE(WaitOffer(link.fd, offered)) << "the reader never offered a window";
      ASSERT_TRUE(link.tokens.Put('g'));
    }
    reader.join();
    ASSERT_TRUE(ok) << "message " << i << " (" << sizes[i] << " bytes) corrupt or short";
    pos += sizes[i];
  }
  EXPECT_EQ(link.child.WaitCode(10000), 0);
  const proto::StreamStats st = StatsOf(link.fd);
  EXPECT_TRUE(st.single_copy_in);
  EXPECT_GE(st.windows_filled, sizes.size() - 1) << "a tokened message went by the ring";
  EXPECT_GT(st.single_copy_bytes_received, 1u << 20);  // SendPattern sends 256 KiB per call
  // MSG_PEEK after it all: nothing left, and the stream still works both ways.
  char c;
  EXPECT_EQ(san_recv(link.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT), 0);  // the child closed: EOF
}

TEST(SocketSingleCopy, PeekSeesTheMessageThatThenArrivesWhole) {
  Watchdog dog(30);
  const std::vector<size_t> sizes = {200000, 300000};
  Link link;
  ASSERT_NO_FATAL_FAILURE(OpenPrimed(&link, sizes));
  ASSERT_TRUE(link.tokens.Put('g'));
  // A peeking reader never offers a window: the message comes by the ring, peek shows its start.
  std::vector<uint8_t> peek(100000);
  ssize_t n = san_recv(link.fd, peek.data(), peek.size(), MSG_PEEK);
  ASSERT_GT(n, 0);
  EXPECT_TRUE(Pattern::Get().Check(sizes[0], peek.data(), static_cast<size_t>(n)));
  EXPECT_TRUE(ReadMessage(link.fd, sizes[0], sizes[1], Shape::kWaitAll));
  EXPECT_EQ(link.child.WaitCode(10000), 0);
}

// A receive timeout with a window out: the window is withdrawn before recv returns EAGAIN, and the
// next message still arrives whole (by a fresh window).
TEST(SocketSingleCopy, ReceiveTimeoutWithdrawsTheWindow) {
  Watchdog dog(30);
  const std::vector<size_t> sizes = {100000, 150000};
  Link link;
  ASSERT_NO_FATAL_FAILURE(OpenPrimed(&link, sizes));
  timeval tv{0, 100000};
  ASSERT_EQ(san_setsockopt(link.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
  std::vector<uint8_t> buf(200000);
  const uint64_t offered = StatsOf(link.fd).windows_offered;
  EXPECT_EQ(san_recv(link.fd, buf.data(), buf.size(), 0), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(StatsOf(link.fd).windows_offered, offered + 1);
  std::atomic<bool> ok{false};
  std::thread reader([&] { ok = ReadMessage(link.fd, sizes[0], sizes[1], Shape::kRecv); });
  EXPECT_TRUE(WaitOffer(link.fd, offered + 1));
  ASSERT_TRUE(link.tokens.Put('g'));
  reader.join();
  EXPECT_TRUE(ok);
  EXPECT_EQ(link.child.WaitCode(10000), 0);
  EXPECT_EQ(StatsOf(link.fd).windows_filled, 1u);
}

// A signal interrupts a recv() that has a window out: EINTR, the window is withdrawn, and the
// next message arrives whole.
void OnSignal(int) {}

TEST(SocketSingleCopy, SignalInterruptsWithAWindowOut) {
  Watchdog dog(30);
  const std::vector<size_t> sizes = {100000, 150000};
  Link link;
  ASSERT_NO_FATAL_FAILURE(OpenPrimed(&link, sizes));
  struct sigaction sa {
  }, old{};
  sa.sa_handler = OnSignal;  // no SA_RESTART: the call returns EINTR
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
  const uint64_t offered = StatsOf(link.fd).windows_offered;
  std::atomic<int> result{0}, err{0};
  std::atomic<bool> done{false};
  std::thread reader([&] {
    std::vector<uint8_t> buf(200000);
    result = static_cast<int>(san_recv(link.fd, buf.data(), buf.size(), 0));
    err = errno;
    done = true;
  });
  const pthread_t reader_thread = reader.native_handle();
  EXPECT_TRUE(WaitOffer(link.fd, offered));
  // Keep signalling until the reader is out (it may be spinning, not yet asleep, at the first).
  while (!WaitUntil([&] { return done.load(); }, 20, 1)) pthread_kill(reader_thread, SIGUSR1);
  reader.join();
  sigaction(SIGUSR1, &old, nullptr);
  EXPECT_EQ(result.load(), -1);
  EXPECT_EQ(err.load(), EINTR);
  std::atomic<bool> ok{false};
  std::thread reader2([&] { ok = ReadMessage(link.fd, sizes[0], sizes[1], Shape::kRecv); });
  EXPECT_TRUE(WaitOffer(link.fd, offered + 1));
  ASSERT_TRUE(link.tokens.Put('g'));
  reader2.join();
  EXPECT_TRUE(ok);
  EXPECT_EQ(link.child.WaitCode(10000), 0);
}

// Both ends send half a megabyte before either reads: as with kernel TCP, nobody hangs (single
// copy never makes a sender wait for the receiver).
TEST(SocketSingleCopy, BothSendBeforeReceivingDoesNotDeadlock) {
  Watchdog dog(30);
  constexpr size_t kHalf = 512 * 1024;
  Link link;
  ASSERT_NO_FATAL_FAILURE(Open(&link, [&](int fd, Channel&) {
    for (int round = 0; round < 4; ++round) {
      if (SendPattern(fd, round * kHalf, kHalf) != kHalf) return kSendFailed;
      if (!ReadMessage(fd, round * kHalf, kHalf, Shape::kRecv)) return kRecvFailed;
    }
    return 0;
  }));
  for (int round = 0; round < 4; ++round) {
    ASSERT_EQ(SendPattern(link.fd, round * kHalf, kHalf), kHalf);
    ASSERT_TRUE(ReadMessage(link.fd, round * kHalf, kHalf, Shape::kRecv));
  }
  EXPECT_EQ(link.child.WaitCode(10000), 0);
}

// The sender's kernel refuses process_vm_writev from the start (seccomp, even as root): its WAKEUP
// says so, the receiver never offers, and everything goes by the ring.
TEST(SocketSingleCopy, RefusedAtSetUpFallsBackToTheRing) {
  Watchdog dog(30);
  const std::vector<size_t> sizes = {100000, 300000, 1 << 20};
  Link link;
  ASSERT_NO_FATAL_FAILURE(Open(
      &link,
      [&](int fd, Channel&) {
        uint64_t pos = 0;
        for (size_t s : sizes) {
          if (SendPattern(fd, pos, s) != s) return kSendFailed;
          pos += s;
        }
        return 0;
      },
      /*deny_process_vm=*/true));
  uint64_t pos = 0;
  for (size_t s : sizes) {
    ASSERT_TRUE(ReadMessage(link.fd, pos, s, Shape::kRecv));
    pos += s;
  }
  EXPECT_EQ(link.child.WaitCode(10000), 0);
  const proto::StreamStats st = StatsOf(link.fd);
  EXPECT_FALSE(st.single_copy_in);
  EXPECT_EQ(st.windows_offered, 0u);
  EXPECT_EQ(st.single_copy_bytes_received, 0u);
}

// The refusal comes mid-connection (the sender installs the filter after two single-copy
// messages): its next write fails with EPERM, it declines the window, the message goes by the
// ring, and the receiver stops offering.
TEST(SocketSingleCopy, RefusedMidConnectionFallsBackCleanly) {
  Watchdog dog(30);
  const std::vector<size_t> sizes = {100000, 200000, 300000, 400000, 500000};
  Link link;
  ASSERT_NO_FATAL_FAILURE(Open(&link, [&](int fd, Channel& tokens) {
    bool denied = true;
    int rc = SendOnTokens(fd, tokens, sizes, true, [&](size_t i) {
      if (i == 2) denied = DenyProcessVm();
    });
    return rc != 0 ? rc : denied ? 0 : kSeccompFailed;
  }));
  uint64_t pos = 0;
  uint64_t offered_after_decline = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    SCOPED_TRACE(i);
    const uint64_t offered = StatsOf(link.fd).windows_offered;
    if (i == 3) offered_after_decline = offered;
    std::atomic<bool> ok{false};
    std::thread reader([&] { ok = ReadMessage(link.fd, pos, sizes[i], Shape::kRecv); });
    if (i > 0) {
      // After the decline (message 2) the receiver offers no more windows: just give the token.
      if (i <= 2) {
        EXPECT_TRUE(WaitOffer(link.fd, offered));
      }
      ASSERT_TRUE(link.tokens.Put('g'));
    }
    reader.join();
    ASSERT_TRUE(ok);
    pos += sizes[i];
  }
  EXPECT_EQ(link.child.WaitCode(10000), 0);
  const proto::StreamStats st = StatsOf(link.fd);
  EXPECT_EQ(st.windows_filled, 1u);  // message 1 only
  // Messages 1 and 2 were offered windows. A reader that drains the ring faster than message 0
  // arrives may offer one more in the middle of it (big messages, nothing queued), which the
  // sender leaves unused (it does not line up with the stream): seen once in 90 ASan runs. What
  // must hold is that nothing is offered after the decline.
  EXPECT_GE(st.windows_offered, 2u);
  EXPECT_EQ(st.windows_offered, offered_after_decline);
  EXPECT_FALSE(st.single_copy_in);
}

// The sender is SIGKILLed while it streams large messages into the receiver's windows: the
// receiver gets only correct bytes, then EOF or ECONNRESET, in bounded time.
TEST(SocketSingleCopy, SenderKilledMidTransfer) {
  Watchdog dog(30);
  Link link;
  ASSERT_NO_FATAL_FAILURE(Open(&link, [&](int fd, Channel&) {
    for (uint64_t pos = 0;; pos += 1 << 20) {
      if (SendPattern(fd, pos, 1 << 20) != 1u << 20) return kSendFailed;
    }
  }));
  std::vector<uint8_t> buf(1 << 20);
  uint64_t got = 0;
  while (got < (32u << 20)) {
    ssize_t n = san_recv(link.fd, buf.data(), buf.size(), 0);
    ASSERT_GT(n, 0);
    ASSERT_TRUE(Pattern::Get().Check(got, buf.data(), static_cast<size_t>(n)));
    got += static_cast<uint64_t>(n);
  }
  link.child.Kill();
  const uint64_t start = NowMs();
  for (;;) {
    ssize_t n = san_recv(link.fd, buf.data(), buf.size(), 0);
    if (n <= 0) {
      EXPECT_TRUE(n == 0 || errno == ECONNRESET) << strerror(errno);
      break;
    }
    ASSERT_TRUE(Pattern::Get().Check(got, buf.data(), static_cast<size_t>(n)));
    got += static_cast<uint64_t>(n);
  }
  EXPECT_LT(NowMs() - start, 5000u);
}

}  // namespace
}  // namespace san::testing
