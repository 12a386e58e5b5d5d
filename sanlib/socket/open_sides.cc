#include "sanlib/socket/open_sides.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "sanlib/common/log.h"
#include "sanlib/common/unique_fd.h"

namespace san {

struct OpenSides::Table {
  std::atomic<uint64_t> magic;
  // Open sides that found no free slot in their probe window: while any is, no look can say
  // "closed" (clamped at 0 when read: a hint, whoever wrote it).
  std::atomic<int64_t> unrecorded;
  std::atomic<uint64_t> slots[kSlots];
};

namespace {

constexpr uint64_t kMagic = 0x73616e2d73696465ull;  // "san-side"

// 0 marks a free slot: no key may be 0.
uint64_t Stored(uint64_t key) { return key == 0 ? 1 : key; }
uint32_t Home(uint64_t key) { return static_cast<uint32_t>(key % OpenSides::kSlots); }

}  // namespace

OpenSides& OpenSides::ForThisUser() {
  // Never destroyed: the connection thread may withdraw a side during exit.
  static OpenSides* table =
      new OpenSides("/sanlib-open-sides-" + std::to_string(static_cast<unsigned>(geteuid())));
  return *table;
}

OpenSides::OpenSides(const std::string& shm_name) {
  // O_NOFOLLOW and the checks below: /dev/shm is everyone's; a file another user made under our
  // name, or one of another size or kind, is not used.
  UniqueFd fd(shm_open(shm_name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    SAN_LOG_DEBUG("open sides: shm_open(%s): %s", shm_name.c_str(), strerror(errno));
    return;
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 077) != 0) {
    SAN_LOG_DEBUG("open sides: %s is not this user's private file: not used", shm_name.c_str());
    return;
  }
  // Made now, or by another process a moment ago (ftruncate to the same size is harmless).
  if (st.st_size == 0 && ftruncate(fd.get(), sizeof(Table)) != 0) return;
  if (fstat(fd.get(), &st) != 0 || st.st_size != static_cast<off_t>(sizeof(Table))) return;
  void* p = mmap(nullptr, sizeof(Table), PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return;
  auto* t = static_cast<Table*>(p);
  uint64_t magic = 0;
  if (!t->magic.compare_exchange_strong(magic, kMagic) && magic != kMagic) {
    munmap(p, sizeof(Table));
    return;
  }
  table_ = t;
}

OpenSides::~OpenSides() {
  if (table_) munmap(table_, sizeof(Table));
}

bool OpenSides::Announce(uint64_t key) {
  if (!table_) return false;
  const uint64_t stored = Stored(key);
  for (uint32_t i = 0; i < kProbe; ++i) {
    uint64_t expected = 0;
    if (table_->slots[(Home(stored) + i) % kSlots].compare_exchange_strong(expected, stored)) {
      return true;
    }
  }
  table_->unrecorded.fetch_add(1);
  return true;
}

void OpenSides::Withdraw(uint64_t key) {
  if (!table_) return;
  const uint64_t stored = Stored(key);
  for (uint32_t i = 0; i < kProbe; ++i) {
    uint64_t expected = stored;
    if (table_->slots[(Home(stored) + i) % kSlots].compare_exchange_strong(expected, 0)) return;
  }
  table_->unrecorded.fetch_sub(1);
}

OpenSides::Presence OpenSides::Look(uint64_t key) const {
  if (!table_) return Presence::kUnknown;
  const uint64_t stored = Stored(key);
  for (uint32_t i = 0; i < kProbe; ++i) {
    if (table_->slots[(Home(stored) + i) % kSlots].load(std::memory_order_acquire) == stored) {
      return Presence::kOpen;
    }
  }
  return table_->unrecorded.load(std::memory_order_relaxed) > 0 ? Presence::kUnknown
                                                                : Presence::kClosed;
}

}  // namespace san
