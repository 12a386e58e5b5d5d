#include "socket/socket_table.h"

namespace san {

bool SocketTable::Insert(SanSocket* socket) {
  const int fd = socket->fd;
  if (fd < 0 || fd >= (kPages << kPageBits)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  Page* page = pages_[fd >> kPageBits].load(std::memory_order_acquire);
  if (!page) {
    page = new Page();
    pages_[fd >> kPageBits].store(page, std::memory_order_release);
  }
  auto& slot = page->slots[fd & ((1 << kPageBits) - 1)];
  if (slot.load(std::memory_order_relaxed)) return false;
  slot.store(socket, std::memory_order_release);
  return true;
}

SanSocket* SocketTable::Remove(int fd) {
  if (fd < 0 || fd >= (kPages << kPageBits)) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  Page* page = pages_[fd >> kPageBits].load(std::memory_order_acquire);
  if (!page) return nullptr;
  return page->slots[fd & ((1 << kPageBits) - 1)].exchange(nullptr, std::memory_order_acq_rel);
}

void SocketTable::ForEach(const std::function<void(SanSocket*)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& p : pages_) {
    Page* page = p.load(std::memory_order_acquire);
    if (!page) continue;
    for (auto& slot : page->slots) {
      if (SanSocket* s = slot.load(std::memory_order_acquire)) fn(s);
    }
  }
}

}  // namespace san
