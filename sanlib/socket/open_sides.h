// OpenSides: which late moves' private rendezvous are open right now, for one user on this host --
// a hint in shared memory that tells an upper end whether dialling would be answered.
//
// A late move's lower end opens a private rendezvous (late_upgrade.h) when its turn comes: at
// most ConnectionThread::kMaxLateListeners at once per process, the rest wait. Its upper end used
// to find out by dialling: a refusal cost a socket, a connect and a close, and was tried again
// with exponential backoff. With thousands of connections due at once (a pool of idle
// connections, wrk -c 1000) most dials were refused, each refusal cost the calling data call
// microseconds, and an upper end deep in its backoff left the lower end's side open and unused
// for up to seconds while other moves waited their turn. Here the lower end records the side's
// key (the hash the rendezvous address is made from) when it opens and removes it when it
// closes, and the upper end looks before it dials: a look is a few loads, no system call, so it
// looks again within a millisecond and dials as soon as the side is open.
//
// A hint only, never trusted for more: the table is a file in /dev/shm owned by the user (mode
// 0600, checked), so a process of another user, or in another mount namespace (a container that
// shares the network but not /dev/shm), is not seen: an upper end whose look says "closed" dials
// anyway once its blind time has come (late_upgrade.cc), the way it did before. A side whose
// process died without removing it stays "open": its dials are refused as before. When the table
// is full, sides are counted instead of recorded and every look answers kUnknown.
//
// Thread-safety: all functions are thread-safe and async-signal-unsafe; the table is shared by
// processes through atomics only. Fork: the mapping is inherited (it is the same table).
#pragma once

#include <cstdint>
#include <string>

namespace san {

class OpenSides {
 public:
  enum class Presence { kOpen, kClosed, kUnknown };

  // The table of this user on this host ("/sanlib-open-sides-<euid>" in /dev/shm), opened at the
  // first use; a table that cannot be used answers kUnknown and records nothing.
  static OpenSides& ForThisUser();
  // A table under another name (tests).
  explicit OpenSides(const std::string& shm_name);
  OpenSides(const OpenSides&) = delete;
  OpenSides& operator=(const OpenSides&) = delete;
  ~OpenSides();

  // The side `key` is open. True: recorded or counted, and Withdraw(key) must follow.
  bool Announce(uint64_t key);
  void Withdraw(uint64_t key);
  Presence Look(uint64_t key) const;
  // Whether the table is there at all (a look may answer kClosed).
  bool usable() const { return table_ != nullptr; }

  static constexpr uint32_t kSlots = 8192;
  static constexpr uint32_t kProbe = 64;  // slots looked at from a key's home slot

 private:
  struct Table;
  Table* table_ = nullptr;
};

}  // namespace san
