#include "sanlib/common/shared_mapping.h"

#include "sanlib/common/fd_placement.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

namespace san {
namespace {

size_t RoundToPage(size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size + page - 1) / page * page;
}

Result<void*> MapShared(int fd, size_t size) {
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::FromErrno("mmap");
  return p;
}

}  // namespace

SharedMapping::SharedMapping(SharedMapping&& other) noexcept
    : fd_(std::move(other.fd_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

SharedMapping& SharedMapping::operator=(SharedMapping&& other) noexcept {
  if (this != &other) {
    Unmap();
    fd_ = std::move(other.fd_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedMapping::~SharedMapping() { Unmap(); }

void SharedMapping::Unmap() {
  if (data_) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

Result<SharedMapping> SharedMapping::Create(const char* name, size_t size) {
  size = RoundToPage(size);
  UniqueFd fd(PlaceHigh(memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)));
  if (!fd.valid()) return Status::FromErrno("memfd_create");
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return Status::FromErrno("ftruncate");
  // The size is fixed for the region's life: a peer cannot shrink it under us (SIGBUS).
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Status::FromErrno("fcntl(F_ADD_SEALS)");
  }
  Result<void*> p = MapShared(fd.get(), size);
  if (!p.ok()) return p.status();
  SharedMapping m;
  m.fd_ = std::move(fd);
  m.data_ = p.value();
  m.size_ = size;
  return m;
}

Result<SharedMapping> SharedMapping::Attach(UniqueFd fd, size_t expected_size) {
  expected_size = RoundToPage(expected_size);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return Status::FromErrno("fstat");
  if (static_cast<size_t>(st.st_size) != expected_size) return Status(EINVAL, "segment size check");
  // Without the shrink seal a peer could truncate the file and fault us with SIGBUS.
  int seals = fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || !(seals & F_SEAL_SHRINK)) return Status(EPERM, "segment seal check");
  Result<void*> p = MapShared(fd.get(), expected_size);
  if (!p.ok()) return p.status();
  SharedMapping m;
  m.fd_ = std::move(fd);
  m.data_ = p.value();
  m.size_ = expected_size;
  return m;
}

}  // namespace san
