// PartFile: where a pull writes before the file is whole -- LOCAL.drpc-part, renamed to LOCAL by
// Commit() once the bytes are all there and checked; removed if the PartFile goes without Commit,
// so a failed pull never leaves a short file under the name asked for.
// Thread-safety: one owner.
#pragma once

#include <string>

#include "sanlib/common/status.h"
#include "sanlib/common/unique_fd.h"

namespace san::drpc {

class PartFile {
 public:
  // Creates (truncates) local + ".drpc-part".
  static Result<PartFile> Create(const std::string& local);
  PartFile() = default;  // owns nothing
  PartFile(PartFile&& other) noexcept;
  PartFile& operator=(PartFile&&) = delete;
  ~PartFile();

  int fd() const { return out_.get(); }
  const std::string& temp() const { return temp_; }
  // Closes and renames to the local name; *error says what failed.
  bool Commit(std::string* error);

 private:
  std::string local_, temp_;
  UniqueFd out_;
  bool done_ = true;  // nothing (left) to remove
};

}  // namespace san::drpc
