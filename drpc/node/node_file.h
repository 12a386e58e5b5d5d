// The node's side of a file transfer, whichever way the bytes travel (in the call's messages,
// node/file_transfer.h, or on a data connection, node/data_transfer.h): where a pushed file is
// written and how it is put in place, and how a pulled file is opened.
//
// Paths are checked by CanonicalRemotePath (no "..", no NUL) and opened through the file jail
// (files/jail.h) (openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), so neither a name nor a symlink
// inside the root leads out of it. A pushed file is written to a hidden temporary name in the
// target's directory and renamed into place only by Commit(): a PushTarget destroyed without Commit
// removes its temporary, so a broken push leaves nothing behind and never a half-written file under
// the real name. Without `overwrite` an existing file is kept (ALREADY_EXISTS at Commit).
// Thread-safety: each object belongs to one call; the Jail is read-only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "drpc/proto/drpc_proto.h"
#include "files/jail.h"
#include "sanlib/common/status.h"
#include "sanlib/common/unique_fd.h"

namespace san::drpc {

class PushTarget {
 public:
  // Creates the temporary for header's path (the directory must exist).
  static Result<std::unique_ptr<PushTarget>> Open(const san::files::Jail& jail,
                                                  const FileHeader& header);
  ~PushTarget();
  PushTarget(const PushTarget&) = delete;
  PushTarget& operator=(const PushTarget&) = delete;

  int fd() const { return out_.get(); }
  const std::string& path() const { return path_; }  // canonical, as the summary names it
  // Closes the temporary and renames it to the real name. On failure the temporary is removed.
  Status Commit();

 private:
  PushTarget() = default;
  std::string path_, name_, temp_;
  UniqueFd dir_, out_;
  mode_t mode_ = 0644;
  bool special_bits_ = false, overwrite_ = false, committed_ = false;
};

struct PullSource {
  std::string path;  // canonical
  UniqueFd fd;       // O_RDONLY | O_NONBLOCK
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits
};
// Opens path for reading: a regular file (EINVAL otherwise) inside the root.
Result<PullSource> OpenPullSource(const san::files::Jail& jail, const std::string& path);

// errno -> the gRPC code a client should see (ENOENT NOT_FOUND, EEXIST ALREADY_EXISTS,
// EPERM/EACCES/EXDEV/ELOOP PERMISSION_DENIED, EINVAL/EISDIR/ENOTDIR INVALID_ARGUMENT, ...).
grpc::Status FromSanStatus(const Status& s);

}  // namespace san::drpc
