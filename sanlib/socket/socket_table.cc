#include "sanlib/socket/socket_table.h"

#include "sanlib/common/fork_path.h"

namespace san {

int SocketTable::AnotherFdOf(const SanSocket* socket, int except) {
  int found = -1;
  index_.ForEach([&](int fd, SanSocket* s) {
    if (found < 0 && s == socket && fd != except) found = fd;
  });
  return found;
}

namespace {

// A socket published under several numbers (dup) is visited once, under its own.
template <typename Fn>
inline void EachOnce(FdIndex<SanSocket>& index, Fn&& fn) {
  index.ForEach([&](int fd, SanSocket* s) {
    if (s->fd.load() == fd) fn(s);
  });
}

}  // namespace

void SocketTable::ForEach(const std::function<void(SanSocket*)>& fn) { EachOnce(index_, fn); }

SAN_FORK_PATH void SocketTable::ForEachPlain(void (*fn)(SanSocket*)) { EachOnce(index_, fn); }

void SocketTable::ForEachNumber(const std::function<void(int, SanSocket*)>& fn) {
  index_.ForEach([&](int fd, SanSocket* s) { fn(fd, s); });
}

}  // namespace san
