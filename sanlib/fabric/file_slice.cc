#include "sanlib/fabric/file_slice.h"

#include <sys/uio.h>

#include <cerrno>

namespace san::fabric {

FileRead ReadFileSlice(const FileSlice& slice, void* dst) {
  iovec into{dst, slice.length};
  ssize_t got;
  do {
    got = preadv2(slice.fd, &into, 1, slice.offset, slice.nowait ? RWF_NOWAIT : 0);
    if (got < 0 && errno == EOPNOTSUPP && slice.nowait) {
      got = preadv2(slice.fd, &into, 1, slice.offset, 0);
    }
  } while (got < 0 && errno == EINTR);
  if (got <= 0) return FileRead{0, got == 0 ? 0 : errno};
  return FileRead{static_cast<uint32_t>(got), 0};
}

}  // namespace san::fabric
