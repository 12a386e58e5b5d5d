#include "files/jail.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "files/virtual_path.h"

namespace san::files {
namespace {

// "/a/b" -> "a/b"; "/" -> "." (openat2 wants a relative path to stay relative to the root fd).
std::string Relative(const std::string& vpath) {
  size_t i = 0;
  while (i < vpath.size() && vpath[i] == '/') ++i;
  return i == vpath.size() ? std::string(".") : vpath.substr(i);
}

int OpenAt2(int dirfd, const std::string& path, int flags, mode_t mode) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  if (flags & (O_CREAT | O_TMPFILE)) how.mode = mode;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  while (true) {
    const long fd = syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN) return static_cast<int>(fd);
    // EAGAIN: a concurrent rename raced the resolution; retrying is what the man page asks.
  }
}

}  // namespace

Result<Jail> Jail::Open(const std::string& root) {
  Jail j;
  j.root_.reset(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!j.root_.valid()) return Status::FromErrno("open(root)");
  return j;
}

Result<UniqueFd> Jail::OpenFile(const std::string& vpath, int flags, mode_t mode) const {
  const int fd = OpenAt2(root_.get(), Relative(vpath), flags, mode);
  if (fd < 0) return Status::FromErrno("openat2");
  return UniqueFd(fd);
}

Result<struct stat> Jail::Stat(const std::string& vpath) const {
  Result<UniqueFd> fd = OpenFile(vpath, O_PATH);
  if (!fd.ok()) return fd.status();
  struct stat st {};
  if (fstat(fd->get(), &st) != 0) return Status::FromErrno("fstat");
  return st;
}

Result<struct stat> Jail::Lstat(const std::string& vpath) const {
  Result<UniqueFd> fd = OpenFile(vpath, O_PATH | O_NOFOLLOW);
  if (!fd.ok()) return fd.status();
  struct stat st {};
  if (fstatat(fd->get(), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
    return Status::FromErrno("fstatat");
  }
  return st;
}

Result<UniqueFd> Jail::OpenParent(const std::string& vpath, std::string* name) const {
  std::string base = BaseName(vpath);
  if (base.empty() || base == "." || base == "..") return Status(EPERM, "the root itself");
  Result<UniqueFd> dir = OpenFile(DirName(vpath), O_PATH | O_DIRECTORY);
  if (!dir.ok()) return dir.status();
  *name = std::move(base);
  return dir;
}

Status Jail::MakeDir(const std::string& vpath, mode_t mode) const {
  std::string name;
  Result<UniqueFd> dir = OpenParent(vpath, &name);
  if (!dir.ok()) return dir.status();
  if (mkdirat(dir->get(), name.c_str(), mode) != 0) return Status::FromErrno("mkdir");
  return Status::Ok();
}

Status Jail::RemoveDir(const std::string& vpath) const {
  std::string name;
  Result<UniqueFd> dir = OpenParent(vpath, &name);
  if (!dir.ok()) return dir.status();
  if (unlinkat(dir->get(), name.c_str(), AT_REMOVEDIR) != 0) return Status::FromErrno("rmdir");
  return Status::Ok();
}

Status Jail::Unlink(const std::string& vpath) const {
  std::string name;
  Result<UniqueFd> dir = OpenParent(vpath, &name);
  if (!dir.ok()) return dir.status();
  struct stat st {};
  if (fstatat(dir->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
    return Status(EISDIR, "unlink");
  }
  if (unlinkat(dir->get(), name.c_str(), 0) != 0) return Status::FromErrno("unlink");
  return Status::Ok();
}

Status Jail::Rename(const std::string& from, const std::string& to) const {
  std::string from_name, to_name;
  Result<UniqueFd> from_dir = OpenParent(from, &from_name);
  if (!from_dir.ok()) return from_dir.status();
  Result<UniqueFd> to_dir = OpenParent(to, &to_name);
  if (!to_dir.ok()) return to_dir.status();
  if (renameat(from_dir->get(), from_name.c_str(), to_dir->get(), to_name.c_str()) != 0) {
    return Status::FromErrno("rename");
  }
  return Status::Ok();
}

Status Jail::Chmod(const std::string& vpath, mode_t mode) const {
  // fchmod needs a real (not O_PATH) descriptor; O_RDONLY works for files and directories alike.
  Result<UniqueFd> fd = OpenFile(vpath, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!fd.ok()) return fd.status();
  if (fchmod(fd->get(), mode & 07777) != 0) return Status::FromErrno("chmod");
  return Status::Ok();
}

Result<std::string> Jail::ReadLink(const std::string& vpath) const {
  std::string name;
  Result<UniqueFd> dir = OpenParent(vpath, &name);
  if (!dir.ok()) return dir.status();
  char buf[4096];
  const ssize_t n = readlinkat(dir->get(), name.c_str(), buf, sizeof buf - 1);
  if (n < 0) return Status::FromErrno("readlink");
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace san::files
