#include "sanlib/socket/late_holders.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <new>

#include "sanlib/common/fork_path.h"
#include "sanlib/common/process_ended.h"
#include "sanlib/socket/late_upgrade.h"

namespace san::late_holders {
namespace {

constexpr int kPids = 7;
constexpr int32_t kEmpty = 0;
constexpr int32_t kForking = -1;  // reserved by a fork for its child, which has not taken it yet

// A record's state: its kind (kFree, kMaking: an allocator fills it in, kUsed), kUnknownHolders
// (a fork found no entry free: some holder is not listed, and none may move it), and a
// generation that each allocation bumps. A record is freed only from the kUsed state read before
// its entries were found empty (a compare-and-swap on the whole word): never while its maker is
// still writing its first entry, and never once another process freed it and a third made it
// anew (its entries are that one's then).
constexpr uint32_t kKind = 3;
constexpr uint32_t kFree = 0;
constexpr uint32_t kMaking = 1;
constexpr uint32_t kUsed = 2;
constexpr uint32_t kUnknownHolders = 4;
constexpr uint32_t kGeneration = 8;  // wraps around (unsigned)
struct Record {
  std::atomic<uint32_t> state{kFree};
  std::atomic<int32_t> pids[kPids] = {};
};
static_assert(sizeof(Record) == 32);

constexpr int kRecords = 2047;  // with the header, 64 KiB
struct Region {
  std::atomic<uint32_t> cursor{0};  // where the next allocation looks first
  char pad[sizeof(Record) - sizeof(std::atomic<uint32_t>)];
  Record records[kRecords];
};
static_assert(sizeof(Region) == 64 * 1024);

// The region of this process: made by its first Reserve (in a fork's prepare handler, so the
// child inherits it; fork handlers run one fork at a time) or inherited from its parent. Never
// unmapped. Read by other threads' steps (OthersHold) once a record of theirs exists.
std::atomic<Region*> region{nullptr};

Region* TheRegion(bool make) {
  Region* g = region.load(std::memory_order_acquire);
  if (g || !make) return g;
  void* p =
      mmap(nullptr, sizeof(Region), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  g = new (p) Region();
  region.store(g, std::memory_order_release);
  return g;
}

// Drops the entries of processes that ended; whether an entry other than `self`'s is left (a
// reservation for a child-to-be counts; self 0: any entry).
bool OthersLeft(Record& r, pid_t self) {
  bool others = false;
  for (std::atomic<int32_t>& e : r.pids) {
    int32_t pid = e.load(std::memory_order_acquire);
    if (pid != self && ProcessEnded(pid)) e.compare_exchange_strong(pid, kEmpty);
    pid = e.load(std::memory_order_acquire);
    others |= pid != kEmpty && pid != self;
  }
  return others;
}

bool AllEmpty(const Record& r) {
  for (const std::atomic<int32_t>& e : r.pids) {
    if (e.load(std::memory_order_acquire) != kEmpty) return false;
  }
  return true;
}

// Frees r if it is still the record whose state was `seen` (read before its entries were found
// empty).
void FreeIfStill(Record& r, uint32_t seen) {
  if ((seen & kKind) != kUsed) return;
  const uint32_t free = (seen & ~(kKind | kUnknownHolders)) | kFree;
  r.state.compare_exchange_strong(seen, free, std::memory_order_acq_rel);
}

void FreeIfEmpty(Record& r) {
  const uint32_t seen = r.state.load(std::memory_order_acquire);
  if (AllEmpty(r)) FreeIfStill(r, seen);
}

// A free record, its first entry `self`; -1 if none. Records whose holders all ended are freed
// when no free one is left (a forking server's children often exit without closing).
int Allocate(Region& g, pid_t self) {
  for (int pass = 0; pass < 2; ++pass) {
    const uint32_t start = g.cursor.load(std::memory_order_relaxed);
    for (uint32_t k = 0; k < kRecords; ++k) {
      const int i = static_cast<int>((start + k) % kRecords);
      Record& r = g.records[i];
      uint32_t free = r.state.load(std::memory_order_relaxed);
      const uint32_t generation = (free & ~(kKind | kUnknownHolders)) + kGeneration;
      if ((free & kKind) != kFree ||
          !r.state.compare_exchange_strong(free, generation | kMaking, std::memory_order_acq_rel)) {
        continue;
      }
      for (std::atomic<int32_t>& e : r.pids) e.store(kEmpty, std::memory_order_relaxed);
      r.pids[0].store(self, std::memory_order_release);
      r.state.store(generation | kUsed, std::memory_order_release);
      g.cursor.store(static_cast<uint32_t>(i + 1) % kRecords, std::memory_order_relaxed);
      return i;
    }
    if (pass == 0) {
      for (Record& r : g.records) {
        const uint32_t seen = r.state.load(std::memory_order_acquire);
        if ((seen & kKind) == kUsed && !OthersLeft(r, 0)) FreeIfStill(r, seen);
      }
    }
  }
  return -1;
}

Record* RecordOf(const LateUpgrade& u) {
  Region* g = TheRegion(false);
  return u.holders_record >= 0 && g ? &g->records[u.holders_record] : nullptr;
}

}  // namespace

bool Reserve(LateUpgrade& u, pid_t self) {
  Region* g = u.holders_record == kUnknown ? nullptr : TheRegion(true);
  if (g && u.holders_record < 0) u.holders_record = Allocate(*g, self);
  if (g && u.holders_record >= 0) {
    Record& r = g->records[u.holders_record];
    // A second pass once the entries of ended processes are dropped: a process that holds a
    // connection and forks a helper per request leaves an entry per helper.
    for (int pass = 0; pass < 2; ++pass) {
      for (int e = 0; e < kPids; ++e) {
        int32_t empty = kEmpty;
        if (r.pids[e].compare_exchange_strong(empty, kForking, std::memory_order_acq_rel)) {
          u.holders_entry = e;
          return true;
        }
      }
      if (pass == 0) OthersLeft(r, self);  // for what it drops
    }
    // Seven live holders: the child will not be listed. This process stays listed (its earlier
    // children must go on seeing it), and no holder may move the connection any more.
    r.state.fetch_or(kUnknownHolders, std::memory_order_acq_rel);
    return false;
  }
  u.holders_record = kUnknown;
  return false;
}

SAN_FORK_PATH void TakeReservation(LateUpgrade& u, pid_t self) {
  if (Record* r = RecordOf(u); r && u.holders_entry >= 0) {
    r->pids[u.holders_entry].store(self, std::memory_order_release);
  }
}

bool OthersHold(LateUpgrade& u, pid_t self) {
  if (u.holders_record == kUnknown) return true;
  Record* r = RecordOf(u);
  if (!r) return false;
  if (r->state.load(std::memory_order_acquire) & kUnknownHolders) return true;
  return OthersLeft(*r, self);  // those that ended without closing their copy are dropped
}

void Leave(LateUpgrade& u, pid_t self) {
  Record* r = RecordOf(u);
  if (!r) return;
  u.holders_record = kNoRecord;
  bool was_holder = false;
  for (std::atomic<int32_t>& e : r->pids) {
    int32_t pid = self;
    was_holder |= e.compare_exchange_strong(pid, kEmpty, std::memory_order_acq_rel);
  }
  // Only a holder frees it: a process the record never listed (a raw clone's child) has no say.
  if (was_holder) FreeIfEmpty(*r);
}

}  // namespace san::late_holders
