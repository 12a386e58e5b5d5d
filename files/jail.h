// Jail: every file-system operation confined to one root directory (an FTP session's, a drpc
// node's).
//
// Paths are canonical virtual paths (virtual_path.h). They are opened with openat2(2)
// RESOLVE_IN_ROOT relative to a directory fd of the root, so the kernel itself treats the root as
// "/" for "..", absolute symlinks and relative symlinks alike (as chroot would, without needing
// root or a /proc inside the jail) and the check cannot race with a concurrent rename. Operations
// on a name (mkdir, unlink, rename) open the parent that way and act on the last component, which
// is never "." or "..". RESOLVE_NO_MAGICLINKS stops /proc-style escapes.
// Thread-safety: the root fd is read-only after Open; calls may run concurrently.
#pragma once

#include <sys/stat.h>

#include <string>

#include "sanlib/common/status.h"
#include "sanlib/common/unique_fd.h"

namespace san::files {

class Jail {
 public:
  // Opens the root directory (a real path, outside the jail).
  static Result<Jail> Open(const std::string& root);

  // open(2) flags and mode as usual; O_NOFOLLOW is honoured for the last component.
  Result<UniqueFd> OpenFile(const std::string& vpath, int flags, mode_t mode = 0) const;
  Result<struct stat> Stat(const std::string& vpath) const;   // follows links (inside the jail)
  Result<struct stat> Lstat(const std::string& vpath) const;  // the link itself
  Status MakeDir(const std::string& vpath, mode_t mode) const;
  Status RemoveDir(const std::string& vpath) const;
  Status Unlink(const std::string& vpath) const;
  Status Rename(const std::string& from, const std::string& to) const;
  Status Chmod(const std::string& vpath, mode_t mode) const;
  // The parent directory of vpath, opened in the jail, and vpath's last component.
  Result<UniqueFd> OpenParent(const std::string& vpath, std::string* name) const;
  Result<std::string> ReadLink(const std::string& vpath) const;

  int root_fd() const { return root_.get(); }

 private:
  UniqueFd root_;
};

}  // namespace san::files
