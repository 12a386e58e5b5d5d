#include "net/file_source.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace san::ftp {
namespace {

// Below this a mapping (mmap, lease, munmap: a handful of syscalls and a TLB flush) costs more
// than the copy it saves.
constexpr uint64_t kMinMappedBytes = 1u << 20;
// The mapping moves through the file in windows this large, populated in one go (the page cache
// lookups are batched instead of one page fault per 4 KiB).
constexpr size_t kWindowBytes = 16u << 20;

}  // namespace

FileSource::FileSource(int fd, bool allow_map, size_t chunk_bytes)
    : fd_(fd), chunk_(chunk_bytes), buffer_(std::make_unique<char[]>(chunk_bytes)) {
  if (!allow_map) return;
  // The lease first, the size after: with the lease held nobody can change the size any more.
  // The break notification goes to SIGURG: ignored by default, so it cannot kill us, and we poll
  // F_GETLEASE instead.
  if (fcntl(fd_, F_SETSIG, SIGURG) != 0) return;
  if (fcntl(fd_, F_SETLEASE, F_RDLCK) != 0) return;
  leased_ = true;
  struct stat st {};
  const off_t at = lseek(fd_, 0, SEEK_CUR);
  if (fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || at < 0 || st.st_size < at ||
      static_cast<uint64_t>(st.st_size - at) < kMinMappedBytes) {
    Unmap();
    return;
  }
  pos_ = static_cast<uint64_t>(at);
  end_ = static_cast<uint64_t>(st.st_size);
  if (!MapWindow()) Unmap();
}

FileSource::~FileSource() { Unmap(); }

bool FileSource::LeaseHolds() const {
  // While the lease is being broken F_GETLEASE already reports F_UNLCK (the target type).
  return fcntl(fd_, F_GETLEASE) == F_RDLCK;
}

bool FileSource::MapWindow() {
  if (map_) munmap(map_, map_len_);
  map_ = nullptr;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  map_offset_ = pos_ / page * page;
  map_len_ = static_cast<size_t>(std::min<uint64_t>(kWindowBytes, end_ - map_offset_));
  void* m = mmap(nullptr, map_len_, PROT_READ, MAP_SHARED | MAP_POPULATE, fd_,
                 static_cast<off_t>(map_offset_));
  if (m == MAP_FAILED) return false;
  map_ = static_cast<char*>(m);
  return true;
}

void FileSource::Unmap() {
  if (map_) munmap(map_, map_len_);
  map_ = nullptr;
  map_len_ = 0;
  if (leased_) fcntl(fd_, F_SETLEASE, F_UNLCK);
  leased_ = false;
  // From here on read() carries on where the mapping stopped (end_ is set once mapping began,
  // even if a later window failed to map).
  if (end_ != 0) lseek(fd_, static_cast<off_t>(pos_), SEEK_SET);
  end_ = 0;
}

Result<FileSource::Chunk> FileSource::Next() {
  if (map_ && !LeaseHolds()) Unmap();
  if (map_) {
    if (pos_ >= end_) return Chunk{};
    if (pos_ >= map_offset_ + map_len_ && !MapWindow()) {
      Unmap();
    } else {
      const size_t in_window = static_cast<size_t>(map_offset_ + map_len_ - pos_);
      const size_t n = std::min({chunk_, in_window, static_cast<size_t>(end_ - pos_)});
      const char* p = map_ + (pos_ - map_offset_);
      pos_ += n;
      return Chunk{p, n};
    }
  }
  while (true) {
    const ssize_t r = ::read(fd_, buffer_.get(), chunk_);
    if (r >= 0) return Chunk{buffer_.get(), static_cast<size_t>(r)};
    if (errno != EINTR) return Status::FromErrno("read");
  }
}

const char* FileSource::Pin(const char* p, size_t n) {
  if (!map_ || p < map_ || p >= map_ + map_len_ || LeaseHolds()) return p;
  // Someone wants to write or truncate the file and waits for us: the bytes are still there
  // (we hold the lease until Unmap), so keep a copy of what is left to send and let go.
  memcpy(buffer_.get(), p, n);
  Unmap();
  return buffer_.get();
}

}  // namespace san::ftp
