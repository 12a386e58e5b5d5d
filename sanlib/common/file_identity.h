// FileIdentity: the kernel object an fd names (device and inode), to tell later whether a number
// still names the same object -- the program may have closed it where we do not see (a raw close
// system call, a loop over every fd) and the kernel given the number to something else.
// Thread-safety: plain values; IdentityOf is one fstat.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

namespace san {

struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool known() const { return ino != 0; }
  bool operator==(const FileIdentity&) const = default;
};

// What fd names now; unknown (all zero) if it names nothing (EBADF: errno says so).
inline FileIdentity IdentityOf(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return FileIdentity{};
  return FileIdentity{st.st_dev, st.st_ino};
}

}  // namespace san
