#include "sanlib/socket/socket_table.h"

namespace san {

int SocketTable::AnotherFdOf(const SanSocket* socket, int except) {
  int found = -1;
  index_.ForEach([&](int fd, SanSocket* s) {
    if (found < 0 && s == socket && fd != except) found = fd;
  });
  return found;
}

void SocketTable::ForEach(const std::function<void(SanSocket*)>& fn) {
  // A socket published under several numbers (dup) is visited once, under its own.
  index_.ForEach([&](int fd, SanSocket* s) {
    if (s->fd.load() == fd) fn(s);
  });
}

void SocketTable::ForEachNumber(const std::function<void(int, SanSocket*)>& fn) {
  index_.ForEach([&](int fd, SanSocket* s) { fn(fd, s); });
}

}  // namespace san
