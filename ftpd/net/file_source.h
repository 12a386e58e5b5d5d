// FileSource: the bytes of a file, from its current offset to its end, in chunks that can be
// handed to san_send with as few copies as the file allows.
//
// Why: on the SAN path san_send copies from our memory into the channel (or, single copy, into
// the peer's buffer). Reading the file into a buffer first is one copy more than needed. A
// read-only shared mapping of the file lets san_send copy straight from the page cache. A
// mapping is only safe while nobody can shrink the file (touching a page past a new end of file
// is SIGBUS), so it is used only under a read lease (fcntl F_SETLEASE F_RDLCK): the kernel grants
// it only when nobody has the file open for writing, and from then on anyone who opens it for
// writing or truncates it blocks until we give the lease up. The lease break is seen by polling
// F_GETLEASE before each use of mapped memory (Pin); the unsent rest of the chunk is then copied
// out while the lease still holds, the lease is released and the rest of the file is read().
// The break's signal is routed to SIGURG, whose default disposition discards it.
// Without a lease (not the file's owner and no CAP_LEASE, a file system without leases, a writer
// already there), or for small files, chunks are read() into an owned buffer, as before.
//
// Thread-safety: one owner. Ownership: borrows the fd (it must outlive the FileSource, opened
// O_RDONLY); owns the mapping, the lease and the buffer. The file offset of the fd is not used
// after construction when mapped (positions are tracked here).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"

namespace san::ftp {

class FileSource {
 public:
  // Callers that wait for a slow peer while holding mapped memory wait at most this long between
  // Pins: a writer blocked on our lease takes it by force after /proc/sys/fs/lease-break-time
  // (45 s by default), after which the mapping may shrink under us.
  static constexpr int kLeaseCheckMs = 1000;

  struct Chunk {
    const char* data = nullptr;
    size_t size = 0;  // 0: end of file
  };

  // Reads fd from its current offset. allow_map: try the mapping (callers pass false when the
  // bytes are converted anyway, e.g. TYPE A, or when the path copies through the kernel).
  FileSource(int fd, bool allow_map, size_t chunk_bytes);
  ~FileSource();
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  // The next chunk, valid until the next call. Errors are the read's.
  Result<Chunk> Next();
  // Call before each use of chunk memory [p, p+n) (each send attempt): returns where those bytes
  // are now -- p itself, or, once the lease is being broken, a private copy (valid until Next).
  const char* Pin(const char* p, size_t n);

  bool mapped() const { return map_ != nullptr; }

 private:
  void Unmap();
  bool LeaseHolds() const;
  bool MapWindow();

  int fd_;
  size_t chunk_;
  std::unique_ptr<char[]> buffer_;
  // Mapped state: the file is [0, end_), we are at pos_; the mapping covers
  // [map_offset_, map_offset_ + map_len_).
  char* map_ = nullptr;
  size_t map_len_ = 0;
  uint64_t map_offset_ = 0;
  uint64_t pos_ = 0;
  uint64_t end_ = 0;
  bool leased_ = false;
};

}  // namespace san::ftp
