#include "sanlib/common/fd_placement.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sanlib/common/file_identity.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/small_file.h"
#include "sanlib/common/unique_fd.h"

namespace san {
namespace {

// The highest the region may begin. fork() copies the fd table up to the highest open fd, and
// exit frees it: one fd of ours at 786,432 (a quarter below a container's 1,048,576) would make
// every fork of the process copy a 6 MiB table. The cost grows with the number (docs/compat.md
// "What sanrun costs a process").
constexpr rlim_t kHighestBase = 16384;

int HighBase() {
  static const int base = [] {
    rlimit limit{};
    return getrlimit(RLIMIT_NOFILE, &limit) == 0 ? HighFdBaseFor(limit.rlim_cur) : -1;
  }();
  return base;
}

// F_DUPFD_CLOEXEC as the kernel's fcntl: under the compatibility layer fcntl is interposed.
int DupAtLeast(int fd, int lowest) { return kernel::fcntl(fd, F_DUPFD_CLOEXEC, lowest); }

// The low region: from FD_SETSIZE up.
constexpr int kLowBase = 1024;

// The record of the fds placed low: lock-free, since close_range may run in a fork child whose
// parent had another thread in the middle of placing one. KernelClose frees a slot as sanlib
// closes its fd (ForgetPlacedLow). A slot whose file went behind our back (the program closed the
// number or took it over) is stale: Record takes it again when no slot is free, and two slots
// may then name one number. The file is known by fstat's device and inode, which all eventfds and
// epoll instances share (one anonymous inode): an eventfd of ours that the program closed and
// whose number it gave to an eventfd of its own still looks ours.
constexpr int kLowSlots = 64;
constexpr int kFree = -1;
constexpr int kBeingWritten = -2;
struct LowSlot {
  std::atomic<int> fd{kFree};
  std::atomic<uint64_t> dev{0};
  std::atomic<uint64_t> ino{0};
};
LowSlot g_low_slots[kLowSlots];

bool SlotNames(const LowSlot& slot, int fd, const FileIdentity& id) {
  return slot.fd.load(std::memory_order_acquire) == fd &&
         slot.dev.load(std::memory_order_relaxed) == id.dev &&
         slot.ino.load(std::memory_order_relaxed) == id.ino &&
         slot.fd.load(std::memory_order_acquire) == fd;  // not rewritten meanwhile
}

// Takes a slot for fd, a free one if there is one, else a stale one (the program closed or took
// over an fd of ours behind our back: KernelClose did not see it); false if all are in use.
bool Record(int fd) {
  const FileIdentity id = IdentityOf(fd);
  if (!id.known()) return false;
  for (const bool free_only : {true, false}) {
    for (LowSlot& slot : g_low_slots) {
      int was = slot.fd.load(std::memory_order_acquire);
      if (was == kBeingWritten || (free_only && was != kFree)) continue;
      if (was != kFree) {
        const FileIdentity held = IdentityOf(was);
        if (held.known() && SlotNames(slot, was, held)) continue;  // still ours
      }
      if (!slot.fd.compare_exchange_strong(was, kBeingWritten, std::memory_order_acq_rel)) {
        continue;
      }
      slot.dev.store(id.dev, std::memory_order_relaxed);
      slot.ino.store(id.ino, std::memory_order_relaxed);
      slot.fd.store(fd, std::memory_order_release);
      return true;
    }
  }
  return false;
}

}  // namespace

int HighFdBaseFor(rlim_t soft_limit) {
  if (soft_limit == RLIM_INFINITY || soft_limit < 1024) return -1;
  const rlim_t top_quarter = soft_limit - soft_limit / 4;
  return static_cast<int>(top_quarter < kHighestBase ? top_quarter : kHighestBase);
}

int HighFdBase() { return HighBase(); }

namespace {

// The highest number one of ours took in the high region (InOwnPlace looks no higher: a
// program's fds above it are not ours, and a close of one costs no system call of ours).
std::atomic<int> g_high_watermark{-1};

int NoteHigh(int fd) {
  int seen = g_high_watermark.load(std::memory_order_relaxed);
  while (fd > seen && !g_high_watermark.compare_exchange_weak(seen, fd)) {
  }
  return fd;
}

}  // namespace

int PlaceHigh(int fd) {
  const int base = HighBase();
  if (fd < 0 || base < 0) return fd;
  if (fd >= base) return NoteHigh(fd);
  const int moved = DupAtLeast(fd, base);
  if (moved < 0) return fd;  // no room up there: keep the low one
  KernelClose(fd);
  return NoteHigh(moved);
}

int PlaceLow(int fd) {
  const int base = HighBase();
  if (fd < 0 || base < kLowBase + kLowSlots) return PlaceHigh(fd);
  int placed = fd;
  if (fd < kLowBase) {
    placed = DupAtLeast(fd, kLowBase);
    if (placed < 0) return PlaceHigh(fd);
    KernelClose(fd);
  }
  // The program fills the numbers up to the high region: ours are there already.
  if (placed >= base) return NoteHigh(placed);
  return Record(placed) ? placed : PlaceHigh(placed);
}

bool IsPlacedLow(int fd) {
  if (fd < kLowBase) return false;
  bool listed = false;
  for (const LowSlot& slot : g_low_slots) {
    listed |= slot.fd.load(std::memory_order_acquire) == fd;
  }
  if (!listed) return false;  // the usual answer, without a system call
  const FileIdentity id = IdentityOf(fd);
  if (!id.known()) return false;
  for (const LowSlot& slot : g_low_slots) {
    if (SlotNames(slot, fd, id)) return true;
  }
  return false;
}

bool InOwnPlace(int fd) {
  const int high = HighBase();
  return (high > 0 && fd >= high && fd <= g_high_watermark.load(std::memory_order_relaxed)) ||
         IsPlacedLow(fd);
}

std::vector<int> PlacedLowIn(int first, int last) {
  std::vector<int> fds;
  for (const LowSlot& slot : g_low_slots) {
    const int fd = slot.fd.load(std::memory_order_acquire);
    if (fd < first || fd > last) continue;  // also kFree and kBeingWritten: first >= 0
    const FileIdentity id = IdentityOf(fd);
    if (id.known() && SlotNames(slot, fd, id)) fds.push_back(fd);
  }
  std::sort(fds.begin(), fds.end());
  fds.erase(std::unique(fds.begin(), fds.end()), fds.end());
  return fds;
}

void ForgetPlacedLow(int fd) {
  if (fd < kLowBase) return;
  for (LowSlot& slot : g_low_slots) {
    int was = fd;
    if (slot.fd.load(std::memory_order_relaxed) == fd) {
      slot.fd.compare_exchange_strong(was, kFree, std::memory_order_acq_rel);
    }
  }
}

namespace {

// The process's thread count (field 20 of /proc/self/stat), or 0 if it cannot be read.
long ThreadCount() {
  std::string stat;
  if (!ReadSmallFile("/proc/self/stat", &stat, 4096)) return 0;
  const size_t end_of_name = stat.rfind(')');
  if (end_of_name == std::string::npos) return 0;
  const char* p = stat.c_str() + end_of_name + 1;
  for (int field = 3; field < 20; ++field) {  // skip fields 3..19
    p = std::strchr(p + 1, ' ');
    if (!p) return 0;
  }
  return std::strtol(p + 1, nullptr, 10);
}

}  // namespace

void GrowFdTableWhileAlone() {
  const int base = HighBase();
  if (base < 0 || ThreadCount() != 1) return;
  UniqueFd probe(eventfd(0, EFD_CLOEXEC));
  if (!probe.valid()) return;
  const int high = DupAtLeast(probe.get(), base);
  if (high >= 0) KernelClose(high);
}

int DupHigh(int fd) {
  const int base = HighBase();
  if (base >= 0) {
    const int high = DupAtLeast(fd, base);
    if (high >= 0) return NoteHigh(high);
  }
  return DupAtLeast(fd, 0);
}

}  // namespace san
