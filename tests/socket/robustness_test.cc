// SAN sockets facing a dead or hostile peer (DESIGN.md "Security and bad input", docs/fabric.md
// "Validation"):
//   - the peer is SIGKILLed while we sleep in recv, send (window full) or poll, or while data is
//     flowing: we get ECONNRESET/EOF (recv), EPIPE/ECONNRESET (send), POLLERR/POLLHUP/POLLIN (poll)
//     within 5 s, and once we close, the connection's memfd segment and rendezvous sockets are
//     gone;
//   - a hostile peer scribbles over the shared segment -- descriptor ring, completion ring, random
//     bytes over the header and side blocks, and the victim's own arena where its stream state
//     used to live -- while the victim sleeps in recv, send or poll: the victim gets ECONNRESET (or
//     carries on, for scribbles over plain data), never crashes, overreads (run under the asan
//     preset) or hangs.
// The attacker is the test process (it owns the server end and reaches the segment through the
// white-box accessors); each victim is a child that reports what it saw through a pipe, so a crash
// or hang of the victim is a clean failure here. Every wait is bounded.
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "robust_util.h"
#include "sanlib/fabric/shm/shm_endpoint.h"
#include "sanlib/fabric/shm/shm_layout.h"
#include "sanlib/proto/wire.h"
#include "sanlib/socket/runtime.h"

#if defined(__SANITIZE_THREAD__)
// Every test forks children of a multithreaded process (sanlib's threads, the Watchdog) that start
// sanlib's threads again, which is what these tests are about; ThreadSanitizer kills such children
// unless told not to.
extern "C" const char* __tsan_default_options() { return "die_after_fork=0"; }
#endif

namespace san::testing {
namespace {

using fabric::shm::Layout;
using fabric::shm::ShmEndpoint;
using fabric::shm::SideBlock;

constexpr uint64_t kDeathBoundMs = 5000;

// ---------------------------------------------------------------------------------------------
// Peer death

// The survivor's end of a connection to a child, with the segment inodes that belong to it.
struct Survivor {
  int lfd = -1;
  uint16_t port = 0;
  int fd = -1;
  std::set<ino_t> segments;  // memfds this connection added to our fd table
  Child peer;
  Channel ready;
};

// Listens, starts the peer (which connects and runs `body(fd)`), accepts. The peer reports ready
// through `ready` when it wants to.
void AcceptFromChild(Survivor* s, const std::function<int(int fd, Channel* ready)>& body) {
  const std::set<ino_t> before = SanMemfds(getpid());
  s->lfd = SanListener(&s->port);
  ASSERT_GE(s->lfd, 0);
  const uint16_t port = s->port;
  Channel* ready = &s->ready;
  s->peer.Start([port, ready, body] {
    const int fd = SanConnect(port);
    if (fd < 0) return 30;
    if (!IsShm(fd)) return 31;
    return body(fd, ready);
  });
  s->fd = san_accept(s->lfd, nullptr, nullptr);
  ASSERT_GE(s->fd, 0);
  ASSERT_TRUE(IsShm(s->fd));
  for (ino_t i : SanMemfds(getpid())) {
    if (!before.count(i)) s->segments.insert(i);
  }
  ASSERT_FALSE(s->segments.empty()) << "no sanlib memfd appeared for the connection";
}

// After the survivor closes: the segment and, once the listener is closed too, every rendezvous
// socket of that port disappear (polled with a deadline: the close thread releases them).
void ExpectReclaimed(Survivor* s) {
  EXPECT_EQ(san_close(s->fd), 0);
  s->fd = -1;
  const pid_t me = getpid();
  EXPECT_TRUE(WaitUntil([&] { return !HoldsAnyOf(me, s->segments); }, 5000))
      << "the segment is still open in the survivor after close";
  const std::string name = RendezvousName(s->port);
  EXPECT_EQ(CountUnixSockets(name, /*listening_only=*/true), 1) << "listener missing before close";
  EXPECT_EQ(san_close(s->lfd), 0);
  s->lfd = -1;
  EXPECT_TRUE(WaitUntil([&] { return CountUnixSockets(name, true) == 0; }, 5000))
      << "the rendezvous listener " << name << " survived its close";
  EXPECT_TRUE(WaitUntil([&] { return CountUnixSockets(name, false) == 0; }, 5000))
      << "rendezvous sockets named " << name << " remain";
}

// Kills `pid` after `delay_ms` (or once `when` holds), records when.
class Killer {
 public:
  Killer(pid_t pid, int delay_ms, std::function<bool()> when = nullptr)
      : thread_([this, pid, delay_ms, when] {
          if (when) WaitUntil(when, 20000, 1);
          SleepMs(delay_ms);
          killed_at_.store(NowMs());  // first: the survivor may wake before kill() returns
          kill(pid, SIGKILL);
        }) {}
  ~Killer() { thread_.join(); }
  // Milliseconds from the kill to now (0 if the kill has not happened yet).
  uint64_t SinceKill() const {
    const uint64_t t = killed_at_.load();
    return t ? NowMs() - t : 0;
  }
  bool done() const { return killed_at_.load() != 0; }

 private:
  std::atomic<uint64_t> killed_at_{0};
  std::thread thread_;
};

int PauseForever() {
  for (;;) pause();
}

TEST(SocketPeerDeath, SurvivorSleepingInRecvGetsReset) {
  Watchdog dog(30);
  Survivor s;
  ASSERT_NO_FATAL_FAILURE(AcceptFromChild(&s, [](int fd, Channel* ready) {
    if (SendPattern(fd, 0, 1 << 20) != (1u << 20)) return 40;
    ready->Put(1);
    return PauseForever();
  }));
  const ReadResult head = ReadPattern(s.fd, 0, 1 << 20);
  ASSERT_EQ(head.bytes, 1u << 20);
  Killer killer(s.peer.pid(), 200);  // we are asleep in recv by then
  char buf[4096];
  const ssize_t n = san_recv(s.fd, buf, sizeof buf, 0);
  const int err = errno;
  ASSERT_TRUE(killer.done()) << "recv returned before the peer died: " << n;
  EXPECT_LT(killer.SinceKill(), kDeathBoundMs);
  EXPECT_TRUE(n == 0 || (n < 0 && err == ECONNRESET)) << n << " " << strerror(err);
  EXPECT_EQ(s.peer.WaitCode(5000), 128 + SIGKILL);
  ExpectReclaimed(&s);
}

TEST(SocketPeerDeath, SurvivorReadingMidStreamGetsAllDataThenReset) {
  Watchdog dog(30);
  Survivor s;
  ASSERT_NO_FATAL_FAILURE(AcceptFromChild(&s, [](int fd, Channel*) {
    for (uint64_t pos = 0;;) {
      const size_t n = SendPattern(fd, pos, 1 << 20);
      if (n == 0) return 41;
      pos += n;
    }
  }));
  std::atomic<uint64_t> got{0};
  Killer killer(s.peer.pid(), 0, [&] { return got.load() >= (8u << 20); });
  ReadResult r;
  std::vector<uint8_t> buf(128 * 1024);
  for (;;) {
    const ssize_t n = san_recv(s.fd, buf.data(), buf.size(), 0);
    if (n <= 0) {
      r.end = n == 0 ? 0 : errno;
      break;
    }
    if (!Pattern::Get().Check(r.bytes, buf.data(), static_cast<size_t>(n))) {
      r.corrupt = true;
      break;
    }
    r.bytes += static_cast<uint64_t>(n);
    got.store(r.bytes);
    if (killer.done() && killer.SinceKill() > 10000) break;
  }
  ASSERT_TRUE(killer.done());
  EXPECT_FALSE(r.corrupt) << "bad byte at " << r.bytes;
  EXPECT_GE(r.bytes, 8u << 20);
  EXPECT_TRUE(r.end == 0 || r.end == ECONNRESET) << strerror(r.end);
  EXPECT_LT(killer.SinceKill(), kDeathBoundMs);
  EXPECT_EQ(s.peer.WaitCode(5000), 128 + SIGKILL);
  ExpectReclaimed(&s);
}

TEST(SocketPeerDeath, SurvivorBlockedInSendGetsEpipeOrReset) {
  Watchdog dog(30);
  Survivor s;
  ASSERT_NO_FATAL_FAILURE(AcceptFromChild(&s, [](int, Channel*) { return PauseForever(); }));
  Killer killer(s.peer.pid(), 300);  // our window is full and we sleep long before that
  uint64_t sent = 0;
  ssize_t n = 0;
  int err = 0;
  while (!killer.done() || killer.SinceKill() < 10000) {
    n = san_send(s.fd, Pattern::Get().View(sent), 512 * 1024, MSG_NOSIGNAL);
    if (n < 0) {
      err = errno;
      break;
    }
    sent += static_cast<uint64_t>(n);
  }
  ASSERT_TRUE(killer.done()) << "send failed before the peer died: " << strerror(err);
  EXPECT_LT(killer.SinceKill(), kDeathBoundMs);
  EXPECT_EQ(n, -1);
  EXPECT_TRUE(err == EPIPE || err == ECONNRESET) << strerror(err);
  EXPECT_GE(sent, 512u * 1024) << "the window should have taken something before it filled";
  EXPECT_EQ(s.peer.WaitCode(5000), 128 + SIGKILL);
  ExpectReclaimed(&s);
}

TEST(SocketPeerDeath, SurvivorSleepingInPollWakes) {
  Watchdog dog(30);
  Survivor s;
  ASSERT_NO_FATAL_FAILURE(AcceptFromChild(&s, [](int, Channel*) { return PauseForever(); }));
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);  // a kernel fd in the same poll set, never ready
  Killer killer(s.peer.pid(), 200);
  pollfd p[2] = {{s.fd, POLLIN, 0}, {pipefd[0], POLLIN, 0}};
  const int rc = san_poll(p, 2, 10000);
  ASSERT_TRUE(killer.done()) << "poll returned before the peer died: " << rc;
  EXPECT_LT(killer.SinceKill(), kDeathBoundMs);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(p[0].revents & (POLLERR | POLLHUP | POLLIN), 0) << p[0].revents;
  EXPECT_EQ(p[1].revents, 0);
  char byte;
  const ssize_t n = san_recv(s.fd, &byte, 1, MSG_DONTWAIT);
  EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n << " " << strerror(errno);
  close(pipefd[0]);
  close(pipefd[1]);
  EXPECT_EQ(s.peer.WaitCode(5000), 128 + SIGKILL);
  ExpectReclaimed(&s);
}

// The survivor is the client this time (the segment is its own memfd); the dead peer had accepted.
TEST(SocketPeerDeath, ClientSurvivorOfKilledServer) {
  Watchdog dog(30);
  Channel port_ch;
  Child server([&] {
    uint16_t port = 0;
    const int lfd = SanListener(&port);
    if (lfd < 0) return 10;
    port_ch.Put(port);
    const int c = san_accept(lfd, nullptr, nullptr);
    if (c < 0) return 11;
    return PauseForever();
  });
  uint16_t port = 0;
  ASSERT_TRUE(port_ch.Get(&port, 5000));
  const std::set<ino_t> before = SanMemfds(getpid());
  const int fd = SanConnect(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(IsShm(fd));
  std::set<ino_t> segments;
  for (ino_t i : SanMemfds(getpid())) {
    if (!before.count(i)) segments.insert(i);
  }
  ASSERT_FALSE(segments.empty());
  Killer killer(server.pid(), 200);
  char byte;
  const ssize_t n = san_recv(fd, &byte, 1, 0);
  const int err = errno;
  ASSERT_TRUE(killer.done());
  EXPECT_LT(killer.SinceKill(), kDeathBoundMs);
  EXPECT_TRUE(n == 0 || (n < 0 && err == ECONNRESET)) << n << " " << strerror(err);
  EXPECT_EQ(server.WaitCode(5000), 128 + SIGKILL);
  EXPECT_EQ(san_close(fd), 0);
  const pid_t me = getpid();
  EXPECT_TRUE(WaitUntil([&] { return !HoldsAnyOf(me, segments); }, 5000));
  EXPECT_TRUE(WaitUntil([&] { return CountUnixSockets(RendezvousName(port), false) == 0; }, 5000));
}

// ---------------------------------------------------------------------------------------------
// Hostile peer

enum class VictimMode : int {
  kRecv,  // blocking recv until it fails or ends
  kSend,  // blocking sends until one fails
  kPoll,  // san_poll(POLLIN) then recv until it fails or ends
  kEcho,  // answers every byte with one byte, until recv or send fails or ends
};

// What the victim saw; it exits 0 after reporting unless it crashed.
struct VictimReport {
  int rc = 0;          // return of the call that ended the loop (poll's for kPoll)
  int err = 0;         // errno of the failing call, 0 for EOF
  short revents = 0;   // kPoll
  uint64_t bytes = 0;  // data moved before the end
  uint64_t ms = 0;     // how long the victim's loop ran
};

int RunVictim(int fd, VictimMode mode, Channel* ready, Channel* report) {
  SetNoDelay(fd);
  ready->Put(1);
  VictimReport rep;
  const uint64_t t0 = NowMs();
  char buf[4096];
  auto recv_to_end = [&] {
    for (;;) {
      const ssize_t n = san_recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        rep.bytes += static_cast<uint64_t>(n);
        continue;
      }
      if (mode != VictimMode::kPoll) rep.rc = static_cast<int>(n);
      rep.err = n < 0 ? errno : 0;
      return;
    }
  };
  switch (mode) {
    case VictimMode::kRecv:
      recv_to_end();
      break;
    case VictimMode::kSend:
      for (;;) {
        const ssize_t n = san_send(fd, Pattern::Get().View(rep.bytes), 256 * 1024, MSG_NOSIGNAL);
        if (n < 0) {
          rep.rc = -1;
          rep.err = errno;
          break;
        }
        rep.bytes += static_cast<uint64_t>(n);
      }
      break;
    case VictimMode::kPoll: {
      pollfd p{fd, POLLIN, 0};
      rep.rc = san_poll(&p, 1, 8000);
      rep.revents = p.revents;
      recv_to_end();
      break;
    }
    case VictimMode::kEcho:
      for (;;) {
        const ssize_t n = san_recv(fd, buf, 1, 0);
        if (n <= 0) {
          rep.rc = static_cast<int>(n);
          rep.err = n < 0 ? errno : 0;
          break;
        }
        if (san_send(fd, buf, 1, MSG_NOSIGNAL) != 1) {
          rep.rc = -1;
          rep.err = errno;
          break;
        }
        ++rep.bytes;
      }
      break;
  }
  rep.ms = NowMs() - t0;
  report->Put(rep);
  san_close(fd);
  return 0;
}

// One connection with a victim child (client, side 0) and the test process as attacker (server,
// side 1) holding the segment.
class Hostile {
 public:
  static constexpr int kVictim = 0;
  static constexpr int kAttacker = 1;

  void Start(VictimMode mode) {
    lfd_ = SanListener(&port_);
    ASSERT_GE(lfd_, 0);
    const uint16_t port = port_;
    Channel* ready = &ready_;
    Channel* report = &report_;
    victim_.Start(
        [port, mode, ready, report] {
          const int fd = SanConnect(port);
          if (fd < 0) return 30;
          if (!IsShm(fd)) return 31;
          return RunVictim(fd, mode, ready, report);
        },
        /*alarm_s=*/15);
    c_ = san_accept(lfd_, nullptr, nullptr);
    ASSERT_GE(c_, 0);
    ASSERT_TRUE(IsShm(c_));
    SetNoDelay(c_);
    SanSocket* s = Runtime::Get().table().Find(c_);
    ASSERT_NE(s, nullptr);
    ep_ = dynamic_cast<ShmEndpoint*>(&s->stream->endpoint());
    ASSERT_NE(ep_, nullptr);
    int one = 0;
    ASSERT_TRUE(ready_.Get(&one, 5000));
  }

  ~Hostile() {
    if (c_ >= 0) san_close(c_);
    if (lfd_ >= 0) san_close(lfd_);
  }

  std::byte* base() const { return ep_->segment_for_testing(); }
  const Layout& layout() const { return ep_->layout_for_testing(); }
  SideBlock* side(int i) const {
    return reinterpret_cast<SideBlock*>(base() + layout().side_offset[i]);
  }
  // Packets our end has posted: each took one slot of the victim's rings, so this is the position
  // of the victim's next completion.
  uint64_t attacker_packets_sent() {
    return Runtime::Get().table().Find(c_)->stream->Stats().packets_sent;
  }

  // Legitimate traffic that makes the victim look at the rings: one byte to it.
  void Nudge() { (void)san_send(c_, "!", 1, MSG_DONTWAIT | MSG_NOSIGNAL); }
  // Reads (and drops) up to `bytes` the victim sent, for at most `ms`: frees the victim's window.
  uint64_t Drain(uint64_t bytes, int ms) {
    std::vector<char> buf(256 * 1024);
    uint64_t got = 0;
    const uint64_t end = NowMs() + static_cast<uint64_t>(ms);
    while (got < bytes && NowMs() < end) {
      pollfd p{c_, POLLIN, 0};
      san_poll(&p, 1, 20);
      const ssize_t n = san_recv(c_, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n > 0) got += static_cast<uint64_t>(n);
      if (n == 0 || (n < 0 && errno != EAGAIN)) break;
    }
    return got;
  }

  // The victim's report, within `ms`.
  bool Report(VictimReport* rep, int ms) { return report_.Get(rep, ms); }
  // Closes our end: the victim then sees EOF or a reset.
  void CloseOurEnd() {
    if (c_ >= 0) san_close(c_);
    c_ = -1;
  }
  // Closes our end and returns the victim's exit code (-1: it had to be killed).
  int Finish(int ms = 5000) {
    CloseOurEnd();
    return victim_.WaitCode(ms);
  }

  // The victim's arena, and where its first posted receive buffer is (its descriptors are in
  // its own side block, positions 0 .. P-1 posted at set-up).
  std::byte* victim_arena() const { return base() + layout().arena_offset[kVictim]; }
  size_t victim_arena_bytes() const { return layout().arena_bytes[kVictim]; }
  // Bytes at the start of the victim's arena before its first receive buffer: where the victim
  // keeps anything it allocated ahead of its buffers (its stream state, if it lives there).
  size_t victim_prefix_bytes() const {
    uint64_t lowest = ~0ull;
    for (uint32_t i = 0; i < fabric::shm::kRingSlots; ++i) {
      const auto& d = side(kVictim)->recv_ring[i];
      if (d.seq.load() == 0) continue;
      lowest = std::min<uint64_t>(lowest, d.offset.load());
    }
    const uint64_t begin = layout().arena_offset[kVictim];
    return lowest == ~0ull || lowest < begin ? 0 : static_cast<size_t>(lowest - begin);
  }

 private:
  uint16_t port_ = 0;
  int lfd_ = -1;
  int c_ = -1;
  Channel ready_, report_;
  Child victim_;
  ShmEndpoint* ep_ = nullptr;
};

// The victim's verdict after a protocol-level scribble: ECONNRESET (first error report), promptly.
void ExpectReset(Hostile& h, const char* what, uint64_t max_bytes = ~0ull) {
  VictimReport rep;
  const bool got = h.Report(&rep, 5000);
  const int code = h.Finish();
  ASSERT_TRUE(got) << what << ": the victim did not report within 5 s (hung?), exit " << code;
  EXPECT_EQ(rep.err, ECONNRESET) << what << ": rc " << rep.rc << " " << strerror(rep.err);
  EXPECT_LE(rep.bytes, max_bytes) << what;
  EXPECT_EQ(code, 0) << what << ": victim crashed or failed";
}

// The victim sleeps in send with a full window; its next send must take a descriptor from the
// attacker's ring. Every way to corrupt one is refused with ECONNRESET.
TEST(SocketHostile, CorruptDescriptorsWhileVictimBlockedInSend) {
  Watchdog dog(50);
  using Desc = fabric::shm::RecvDesc;
  struct Case {
    const char* what;
    std::function<void(const Hostile&, Desc&)> corrupt;
  };
  const Case cases[] = {
      {"garbage seq", [](const Hostile&, Desc& d) { d.seq.store(0xDEADBEEF); }},
      {"offset in the header", [](const Hostile&, Desc& d) { d.offset.store(0); }},
      {"offset beyond the segment", [](const Hostile&, Desc& d) { d.offset.store(1ull << 40); }},
      {"offset into the victim's own arena",
       [](const Hostile& h, Desc& d) {
         d.offset.store(h.layout().arena_offset[Hostile::kVictim]);
       }},
      {"huge length", [](const Hostile&, Desc& d) { d.length.store(0xFFFFFFF0u); }},
      {"offset + length wraps",
       [](const Hostile&, Desc& d) {
         d.offset.store(~0ull - 63);
         d.length.store(0xFFFFFFFFu);
       }},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    Hostile h;
    ASSERT_NO_FATAL_FAILURE(h.Start(VictimMode::kSend));
    SleepMs(150);  // the victim filled our window and sleeps
    // Every slot of the ring the victim takes descriptors from (ours), including the ones it
    // will read next; our own reposts only rewrite slots further ahead.
    for (Desc& d : h.side(Hostile::kAttacker)->recv_ring) k.corrupt(h, d);
    h.Drain(2u << 20, 500);  // credits flow back: the victim wakes and posts
    ExpectReset(h, k.what);
  }
}

// The victim sleeps in recv; the attacker forges completions behind a legitimate byte.
TEST(SocketHostile, CorruptCompletionsWhileVictimBlockedInRecv) {
  Watchdog dog(50);
  struct Case {
    const char* what;
    uint32_t length;
    bool bad_seq;
  };
  const Case cases[] = {
      {"length far beyond the posted receive", 0xFFFFFFF0u, false},
      {"length one beyond the posted receive", 32768 + 1, false},
      {"length of the whole arena", 64u << 20, false},
      {"garbage seq", 1, true},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    Hostile h;
    ASSERT_NO_FATAL_FAILURE(h.Start(VictimMode::kRecv));
    SleepMs(50);                                     // asleep in recv
    const uint64_t pos = h.attacker_packets_sent();  // the victim's next completion position
    auto& slot = h.side(Hostile::kVictim)->completion_ring[(pos + 1) & fabric::shm::kRingMask];
    proto::Header hdr;
    hdr.type = proto::PacketType::kData;
    hdr.seq = static_cast<uint16_t>(pos + 1);
    slot.length.store(k.length);
    slot.imm.store(proto::EncodeImm(hdr));
    slot.seq.store(k.bad_seq ? 0x5A5A5A5Au : static_cast<uint32_t>(pos + 2));
    h.Nudge();  // lands at `pos`; the forged slot right behind it
    ExpectReset(h, k.what, /*max_bytes=*/1);
  }
}

// Forged completions that each look valid to the ring (right seq, small length) but claim more
// receives than the victim posted, and carry garbage immediates.
TEST(SocketHostile, ForgedCompletionsBeyondPostedReceives) {
  Watchdog dog(30);
  Hostile h;
  ASSERT_NO_FATAL_FAILURE(h.Start(VictimMode::kRecv));
  SleepMs(50);
  const uint64_t pos = h.attacker_packets_sent();
  for (uint64_t i = 1; i < fabric::shm::kRingSlots; ++i) {
    auto& slot = h.side(Hostile::kVictim)->completion_ring[(pos + i) & fabric::shm::kRingMask];
    slot.length.store(16);
    slot.imm.store(static_cast<uint32_t>(i * 0x9E3779B9u));
    slot.seq.store(static_cast<uint32_t>(pos + i + 1));
  }
  h.Nudge();
  ExpectReset(h, "forged completions", 1);
}

// Random bytes over the segment header and both side blocks (flags, both rings), while the
// victim sleeps in recv, then in poll. Our own end breaks too; neither process may crash.
TEST(SocketHostile, RandomScribblesOverHeaderAndSideBlocks) {
  Watchdog dog(50);
  std::mt19937_64 rng(20240601);
  for (VictimMode mode : {VictimMode::kRecv, VictimMode::kPoll}) {
    for (int round = 0; round < 6; ++round) {
      SCOPED_TRACE((mode == VictimMode::kRecv ? "recv round " : "poll round ") +
                   std::to_string(round));
      Hostile h;
      ASSERT_NO_FATAL_FAILURE(h.Start(mode));
      SleepMs(30);
      auto* words = reinterpret_cast<uint64_t*>(h.base());
      const size_t n = h.layout().arena_offset[0] / 8;  // header + both side blocks + padding
      for (size_t i = 0; i < n; ++i) words[i] = rng();
      h.Nudge();  // our own post fails on the garbage and rings the victim
      VictimReport rep;
      const bool got = h.Report(&rep, 5000);
      const int code = h.Finish();
      ASSERT_TRUE(got) << "victim did not report (hung?), exit " << code;
      EXPECT_EQ(rep.err, ECONNRESET) << "rc " << rep.rc << " " << strerror(rep.err);
      if (mode == VictimMode::kPoll) {
        EXPECT_EQ(rep.rc, 1);
        EXPECT_NE(rep.revents & (POLLERR | POLLHUP | POLLIN), 0) << rep.revents;
      }
      EXPECT_EQ(rep.bytes, 0u);
      EXPECT_EQ(code, 0) << "victim crashed";
    }
  }
}

// The victim's own arena is as writable by the peer as the rings. Whatever the victim keeps there
// (receive and staging buffers; and whatever it allocated before its first receive buffer, such as
// stream state) must not let the peer crash it, make it read or write outside its memory, or hang
// it. Scribbled data may arrive as garbage or the connection may reset: both are fine.
enum class Fill { kRandom, kOnes, kAscii, kZeros };

void ScribbleArena(Hostile& h, size_t from, size_t len, Fill fill, uint64_t seed) {
  std::byte* p = h.victim_arena() + from;
  len = std::min(len, h.victim_arena_bytes() - from);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < len; ++i) {
    switch (fill) {
      case Fill::kRandom:
        p[i] = static_cast<std::byte>(rng());
        break;
      case Fill::kOnes:
        p[i] = std::byte{0xFF};
        break;
      case Fill::kAscii:
        p[i] = std::byte{0x41};
        break;
      case Fill::kZeros:
        p[i] = std::byte{0};
        break;
    }
  }
}

// Anything but a crash, an overread or a hang is acceptable after arena scribbles. A victim that
// carried on is waiting for more: our close ends its loop (EOF, or a reset for a sender).
void ExpectSurvives(Hostile& h, const std::string& what) {
  h.CloseOurEnd();
  VictimReport rep;
  const bool got = h.Report(&rep, 5000);
  const int code = h.Finish();
  ASSERT_TRUE(got) << what << ": victim did not report within 5 s of our close (hung?), exit "
                   << code;
  EXPECT_TRUE(rep.err == 0 || rep.err == ECONNRESET || rep.err == EPIPE)
      << what << ": " << strerror(rep.err);
  EXPECT_EQ(code, 0) << what << ": victim crashed (exit " << code << ")";
}

// Victim in recv: scribble, nudge, give it a moment, then close our end (EOF for a victim that
// kept going). Sweeps windows across the start of the arena, then the whole arena.
TEST(SocketHostile, ArenaScribblesWhileVictimInRecv) {
  Watchdog dog(55);
  size_t prefix = 0;
  {
    Hostile probe;
    ASSERT_NO_FATAL_FAILURE(probe.Start(VictimMode::kRecv));
    prefix = probe.victim_prefix_bytes();
    probe.Finish();
  }
  // Windows of 256 bytes over what precedes the first receive buffer, plus the first buffer.
  const size_t span = prefix + 4096;
  int round = 0;
  for (Fill fill : {Fill::kOnes, Fill::kAscii}) {
    for (size_t from = 0; from < span; from += 256, ++round) {
      const std::string what = "window at +" + std::to_string(from) +
                               (fill == Fill::kOnes ? " 0xFF" : " 0x41") + " (prefix " +
                               std::to_string(prefix) + ")";
      SCOPED_TRACE(what);
      Hostile h;
      ASSERT_NO_FATAL_FAILURE(h.Start(VictimMode::kRecv));
      SleepMs(5);
      ScribbleArena(h, from, 256, fill, 0);
      h.Nudge();
      SleepMs(5);
      ASSERT_NO_FATAL_FAILURE(ExpectSurvives(h, what));
      if (HasFailure()) return;  // one precise report beats a hundred
    }
  }
  for (int seed = 0; seed < 4; ++seed) {
    Hostile h;
    ASSERT_NO_FATAL_FAILURE(h.Start(VictimMode::kRecv));
    SleepMs(5);
    ScribbleArena(h, 0, h.victim_arena_bytes(), seed == 3 ? Fill::kZeros : Fill::kRandom, seed);
    h.Nudge();
    SleepMs(5);
    ASSERT_NO_FATAL_FAILURE(ExpectSurvives(h, "whole arena, seed " + std::to_string(seed)));
  }
}

// Victim asleep in send with a full window: scribble its arena, then free the window.
TEST(SocketHostile, ArenaScribblesWhileVictimInSend) {
  Watchdog dog(50);
  size_t prefix = 0;
  {
    Hostile probe;
    ASSERT_NO_FATAL_FAILURE(probe.Start(VictimMode::kRecv));
    prefix = probe.victim_prefix_bytes();
    probe.Finish();
  }
  struct Case {
    size_t from, len;
    Fill fill;
  };
  std::vector<Case> cases;
  for (size_t from = 0; from < prefix; from += 1024) cases.push_back({from, 1024, Fill::kAscii});
  cases.push_back({0, prefix + 4096, Fill::kOnes});
  cases.push_back({0, ~size_t{0}, Fill::kRandom});
  for (const Case& k : cases) {
    const std::string what = "from +" + std::to_string(k.from) + " len " + std::to_string(k.len);
    SCOPED_TRACE(what);
    Hostile h;
    ASSERT_NO_FATAL_FAILURE(h.Start(VictimMode::kSend));
    SleepMs(100);
    ScribbleArena(h, k.from, k.len, k.fill, k.from);
    h.Drain(2u << 20, 300);
    ASSERT_NO_FATAL_FAILURE(ExpectSurvives(h, what));
    if (HasFailure()) return;
  }
}

// Victim asleep in poll: scribble its arena, nudge.
TEST(SocketHostile, ArenaScribblesWhileVictimInPoll) {
  Watchdog dog(50);
  for (Fill fill : {Fill::kOnes, Fill::kAscii, Fill::kRandom}) {
    Hostile h;
    ASSERT_NO_FATAL_FAILURE(h.Start(VictimMode::kPoll));
    SleepMs(20);
    ScribbleArena(h, 0, h.victim_prefix_bytes() + 4096, fill, 7);
    h.Nudge();
    SleepMs(5);
    ASSERT_NO_FATAL_FAILURE(ExpectSurvives(h, "poll, fill " + std::to_string(int(fill))));
    if (HasFailure()) return;
  }
}

// A conversation (one byte out, one byte back) with random scribbles over the victim's whole
// arena between the turns: each turn ends in an answer or a reset, never worse.
TEST(SocketHostile, ArenaScribblesDuringEchoConversation) {
  Watchdog dog(30);
  Hostile h;
  ASSERT_NO_FATAL_FAILURE(h.Start(VictimMode::kEcho));
  int answered = 0;
  for (int turn = 0; turn < 50; ++turn) {
    if (turn > 0) {
      ScribbleArena(h, 0, h.victim_arena_bytes(), Fill::kRandom, 1000 + turn);
    }
    h.Nudge();
    if (h.Drain(1, 2000) != 1) break;  // no answer: the connection reset (or the victim died)
    ++answered;
  }
  EXPECT_GE(answered, 1) << "the first, unscribbled turn must work";
  ASSERT_NO_FATAL_FAILURE(ExpectSurvives(h, "echo"));
}

}  // namespace
}  // namespace san::testing
