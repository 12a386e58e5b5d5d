#include "drpc/client/part_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace san::drpc {

Result<PartFile> PartFile::Create(const std::string& local) {
  PartFile f;
  f.local_ = local;
  f.temp_ = local + ".drpc-part";
  f.out_.reset(::open(f.temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!f.out_.valid()) return Status::FromErrno("open");
  f.done_ = false;
  return f;
}

PartFile::PartFile(PartFile&& other) noexcept
    : local_(std::move(other.local_)),
      temp_(std::move(other.temp_)),
      out_(std::move(other.out_)),
      done_(other.done_) {
  other.done_ = true;  // the moved-from object removes nothing
}

PartFile::~PartFile() {
  if (done_) return;
  out_.reset();
  unlink(temp_.c_str());
}

bool PartFile::Commit(std::string* error) {
  if (::close(out_.release()) != 0) {
    *error = "close " + temp_ + ": " + strerror(errno);
    return false;
  }
  if (rename(temp_.c_str(), local_.c_str()) != 0) {
    *error = "rename to " + local_ + ": " + strerror(errno);
    return false;
  }
  done_ = true;
  return true;
}

}  // namespace san::drpc
