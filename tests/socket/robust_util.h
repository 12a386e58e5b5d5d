// Helpers for the multi-process socket tests (fork, robustness, churn, chaos): the forked children
// of support/child.h (always reaped, always bounded in time), SAN listeners/clients on loopback, a
// stream pattern that a receiver can verify position by position, and views of /proc that show
// which segments, fds, threads and rendezvous sockets a process still holds.
//
// Every wait here has a deadline. A Watchdog ends the whole test process if a test body itself
// hangs (a blocking san_* call that never returns).
//
// Thread-safety: none needed (test code); Watchdog uses its own thread.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "san/san.h"
#include "support/child.h"
#include "support/fd_links.h"
#include "support/inet.h"

namespace san::testing {

inline uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

inline void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Polls `pred` until it holds or `timeout_ms` passes; returns its last value.
inline bool WaitUntil(const std::function<bool()>& pred, int timeout_ms, int step_ms = 5) {
  const uint64_t end = NowMs() + static_cast<uint64_t>(timeout_ms);
  for (;;) {
    if (pred()) return true;
    if (NowMs() >= end) return false;
    SleepMs(step_ms);
  }
}

// Ends the process if the test that created it is still running after `seconds`: a hang becomes
// a clear failure instead of a ctest timeout.
class Watchdog {
 public:
  // Returns once the thread is waiting: tests fork right after, and a thread still starting up
  // may hold the allocator's lock (GCC 12's libasan does not take it across fork()), which a fork
  // child would then wait on forever.
  explicit Watchdog(int seconds, const char* what = "test") : what_(what) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mu_);
      started_ = true;
      cv_.notify_all();
      if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "WATCHDOG: %s still running after %d s: hung\n", what_, seconds);
        std::fflush(stderr);
        _exit(99);
      }
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return started_; });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  const char* what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool started_ = false;
  std::thread thread_;
};

using testing_support::Channel;
using testing_support::Child;
using testing_support::ChildExit;
using testing_support::Loopback;

// A SAN listener on 127.0.0.1, ephemeral port. -1 on failure.
inline int SanListener(uint16_t* port) {
  int fd = san_socket(AF_INET, SOCK_SAN, 0);
  if (fd < 0) return -1;
  sockaddr_in a = Loopback(0);
  if (san_bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || san_listen(fd, 64) != 0) {
    san_close(fd);
    return -1;
  }
  *port = testing_support::PortOf(fd);
  return fd;
}

inline int SanConnect(uint16_t port, int type_flags = 0) {
  int fd = san_socket(AF_INET, SOCK_SAN | type_flags, 0);
  if (fd < 0) return -1;
  sockaddr_in a = Loopback(port);
  if (san_connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    san_close(fd);
    return -1;
  }
  return fd;
}

inline bool IsShm(int fd) {
  san_info info{};
  return san_getinfo(fd, &info) == 0 && info.mode == SAN_MODE_SHM;
}

inline void SetNoDelay(int fd) {
  int one = 1;
  san_setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// The byte stream every transfer uses: byte i is table[i % kPeriod], the table being pseudo-random
// and its period a prime, so a lost, repeated or reordered piece shows up at its exact position.
class Pattern {
 public:
  static constexpr size_t kPeriod = 1048573;  // prime, just under 1 MiB

  static const Pattern& Get() {
    static const Pattern* p = new Pattern();
    return *p;
  }
  // Fills `out` with stream bytes [pos, pos + len).
  void Fill(uint64_t pos, void* out, size_t len) const {
    auto* o = static_cast<uint8_t*>(out);
    while (len > 0) {
      const size_t at = pos % kPeriod;
      const size_t n = std::min(len, kPeriod - at);
      std::memcpy(o, table_.data() + at, n);
      o += n;
      pos += n;
      len -= n;
    }
  }
  // True if `data` equals stream bytes [pos, pos + len).
  bool Check(uint64_t pos, const void* data, size_t len) const {
    const auto* d = static_cast<const uint8_t*>(data);
    while (len > 0) {
      const size_t at = pos % kPeriod;
      const size_t n = std::min(len, kPeriod - at);
      if (std::memcmp(d, table_.data() + at, n) != 0) return false;
      d += n;
      pos += n;
      len -= n;
    }
    return true;
  }
  // Why `data` is not stream bytes [pos, pos + len): where the first wrong byte is, and what is
  // there instead -- zeros, or the stream's bytes from another position (a piece lost, repeated
  // or moved shows as its shift).
  std::string Explain(uint64_t pos, const void* data, size_t len) const {
    const auto* d = static_cast<const uint8_t*>(data);
    size_t i = 0;
    while (i < len && d[i] == table_[(pos + i) % kPeriod]) ++i;
    if (i == len) return "no difference";
    std::string out = "first wrong byte at +" + std::to_string(i) + " of " + std::to_string(len);
    const size_t w = std::min<size_t>(32, len - i);
    if (std::all_of(d + i, d + i + w, [](uint8_t b) { return b == 0; })) return out + ": zeros";
    if (w < 16) return out;
    const auto at = std::search(table_.begin(), table_.end(), d + i, d + i + w);
    if (at == table_.end()) return out + ": bytes from nowhere in the stream";
    const int64_t found = at - table_.begin();
    const int64_t wanted = static_cast<int64_t>((pos + i) % kPeriod);
    return out + ": stream bytes shifted by " + std::to_string(found - wanted) +
           " (mod " + std::to_string(kPeriod) + ")";
  }
  // A contiguous view of stream bytes [pos, pos + len) for sending without a copy
  // (len <= kPeriod; the table is stored twice over).
  const uint8_t* View(uint64_t pos) const { return table_.data() + pos % kPeriod; }

 private:
  Pattern() : table_(2 * kPeriod) {
    uint64_t x = 0x243F6A8885A308D3ull;
    for (size_t i = 0; i < kPeriod; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      table_[i] = static_cast<uint8_t>(x >> 24);
    }
    std::memcpy(table_.data() + kPeriod, table_.data(), kPeriod);
  }
  std::vector<uint8_t> table_;
};

// Sends stream bytes [pos, pos + len) with blocking san_send. Returns bytes sent (short on error,
// errno set).
inline size_t SendPattern(int fd, uint64_t pos, size_t len, size_t chunk = 256 * 1024) {
  const Pattern& p = Pattern::Get();
  size_t done = 0;
  while (done < len) {
    const size_t n = std::min({chunk, len - done, Pattern::kPeriod});
    ssize_t r = san_send(fd, p.View(pos + done), n, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return done;
    }
    done += static_cast<size_t>(r);
  }
  return done;
}

// Result of reading a pattern stream to its end.
struct ReadResult {
  uint64_t bytes = 0;  // verified bytes received
  bool corrupt = false;
  int end = 0;  // 0: EOF; else the errno of the failing recv
};

// Receives and verifies pattern bytes starting at `pos` until EOF, an error, or `limit` bytes.
inline ReadResult ReadPattern(int fd, uint64_t pos, uint64_t limit = ~0ull) {
  ReadResult r;
  std::vector<uint8_t> buf(256 * 1024);
  while (r.bytes < limit) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), limit - r.bytes));
    ssize_t n = san_recv(fd, buf.data(), want, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      r.end = errno;
      return r;
    }
    if (n == 0) {
      r.end = 0;
      return r;
    }
    if (!Pattern::Get().Check(pos + r.bytes, buf.data(), static_cast<size_t>(n))) {
      r.corrupt = true;
      return r;
    }
    r.bytes += static_cast<uint64_t>(n);
  }
  r.end = -1;  // stopped at the limit
  return r;
}

// Inodes of the memfd segments (named "sanlib...") process `pid` holds open.
inline std::set<ino_t> SanMemfds(pid_t pid) {
  std::set<ino_t> out;
  for (const testing_support::FdLink& fd : testing_support::FdLinks(pid)) {
    if (fd.target.rfind("/memfd:sanlib", 0) != 0) continue;
    struct stat st;
    if (stat(fd.path.c_str(), &st) == 0) out.insert(st.st_ino);
  }
  return out;
}

inline bool HoldsAnyOf(pid_t pid, const std::set<ino_t>& inodes) {
  for (ino_t i : SanMemfds(pid)) {
    if (inodes.count(i)) return true;
  }
  return false;
}

// Unix sockets in this network namespace whose path is exactly `path` ("@..." for abstract
// names, as /proc/net/unix prints them). `listening_only`: only those in the listening state.
inline int CountUnixSockets(const std::string& path, bool listening_only) {
  std::ifstream in("/proc/net/unix");
  std::string line;
  std::getline(in, line);  // header
  int count = 0;
  while (std::getline(in, line)) {
    // Num RefCount Protocol Flags Type St Inode [Path]
    char num[32], path_buf[256] = "";
    unsigned ref, proto, flags, type, st;
    unsigned long inode;
    int fields = std::sscanf(line.c_str(), "%31s %x %x %x %x %x %lu %255s", num, &ref, &proto,
                             &flags, &type, &st, &inode, path_buf);
    if (fields < 8 || path != path_buf) continue;
    if (listening_only && !(flags & 0x10000)) continue;  // __SO_ACCEPTCON
    ++count;
  }
  return count;
}

// Entries of a /proc directory (not "." and ".."), -1 if it cannot be read.
inline int CountEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

// The process's open fds (the listing's own fd excluded) and threads.
inline int OpenFds() { return CountEntries("/proc/self/fd") - 1; }
inline int Threads() { return CountEntries("/proc/self/task"); }

// Abstract unix sockets of sanlib's shm provider held by this process (other tests may run at
// the same time in this network namespace: only our own fds' sockets count).
inline int SanRendezvousSockets() {
  const std::vector<testing_support::FdLink> fds = testing_support::FdLinks();
  if (fds.empty()) return -1;
  std::set<unsigned long> ours;
  for (const testing_support::FdLink& fd : fds) {
    unsigned long inode = 0;
    if (std::sscanf(fd.target.c_str(), "socket:[%lu]", &inode) == 1) ours.insert(inode);
  }
  std::ifstream in("/proc/net/unix");
  std::string line;
  std::getline(in, line);  // header
  int count = 0;
  while (std::getline(in, line)) {
    // Num RefCount Protocol Flags Type St Inode Path
    unsigned long inode = 0;
    char path[256] = "";
    if (std::sscanf(line.c_str(), "%*s %*s %*s %*s %*s %*s %lu %255s", &inode, path) == 2 &&
        std::strncmp(path, "@sanlib/shm/", 12) == 0 && ours.count(inode)) {
      ++count;
    }
  }
  return count;
}

inline std::string RendezvousName(uint16_t port) {
  return "@sanlib/shm/127.0.0.1:" + std::to_string(port);
}

}  // namespace san::testing
