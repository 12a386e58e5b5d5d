#include "sanlib/common/this_pid.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "sanlib/common/fork_path.h"
#include "sanlib/common/raw_syscall.h"

namespace san {
namespace {

// The page holding the cached pid, zeroed by the kernel in a child; null where the kernel does not
// do that (then nothing is cached).
std::atomic<pid_t>* WipedInChildren() {
  static std::atomic<pid_t>* const slot = []() -> std::atomic<pid_t>* {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    if (madvise(p, page, MADV_WIPEONFORK) != 0) {
      munmap(p, page);
      return nullptr;
    }
    return new (p) std::atomic<pid_t>(0);  // all-zero bytes: what a child finds, too
  }();
  return slot;
}

}  // namespace

SAN_FORK_PATH pid_t KernelPid() { return static_cast<pid_t>(Syscall(SYS_getpid)); }

SAN_FORK_PATH pid_t RefreshThisPid() {
  std::atomic<pid_t>* slot = WipedInChildren();
  const pid_t pid = KernelPid();
  if (slot) slot->store(pid, std::memory_order_relaxed);
  return pid;
}

pid_t ThisPid() {
  std::atomic<pid_t>* slot = WipedInChildren();
  if (!slot) return KernelPid();
  pid_t pid = slot->load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = KernelPid();
    slot->store(pid, std::memory_order_relaxed);
  }
  return pid;
}

}  // namespace san
