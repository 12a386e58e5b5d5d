// FileSlice: the file part of a send (Endpoint::PostSendFromFile, san_sendfile) and the one way
// every provider reads it.
//
// Thread-safety: plain values; ReadFileSlice is a pread and safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace san::fabric {

// Up to `length` bytes of `fd` read at `offset` (pread). `nowait`: take only what the page cache
// holds now (RWF_NOWAIT) instead of waiting for the disk.
struct FileSlice {
  int fd = -1;
  off_t offset = 0;
  uint32_t length = 0;
  bool nowait = false;
};

// What the file gave: `bytes`, and when it gave none, why: 0 at end of file, EAGAIN for bytes
// not in the page cache under `nowait`, else the read's errno. A file's failure is never the
// connection's.
struct FileRead {
  uint32_t bytes = 0;
  int error = 0;
};

// Reads `slice` into `dst` (at least slice.length bytes of room). A file that cannot tell whether
// a read would wait (RWF_NOWAIT unsupported) is simply read.
FileRead ReadFileSlice(const FileSlice& slice, void* dst);

}  // namespace san::fabric
