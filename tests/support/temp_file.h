// TempFile: a file of the tests' own under $TMPDIR (else /tmp), open for reading and writing,
// removed with the object. Test-only.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace san::testing_support {

class TempFile {
 public:
  TempFile() {
    const char* dir = getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp");
    path_.append("/san_test_file_XXXXXX");
    fd_ = mkstemp(path_.data());
  }
  // Starts with `contents` (the file position is left at its end).
  template <typename Byte>
  explicit TempFile(const std::vector<Byte>& contents) : TempFile() {
    size_t at = 0;
    while (fd_ >= 0 && at < contents.size()) {
      const ssize_t n = write(fd_, contents.data() + at, contents.size() - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
  }
  ~TempFile() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  std::vector<char> Contents() const {
    struct stat st {};
    fstat(fd_, &st);
    std::vector<char> v(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < v.size()) {
      const ssize_t n = pread(fd_, v.data() + got, v.size() - got, static_cast<off_t>(got));
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    v.resize(got);
    return v;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace san::testing_support
