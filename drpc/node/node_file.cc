#include "drpc/node/node_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <random>

#include "drpc/core/remote_path.h"

namespace san::drpc {
namespace {

std::string TempName(const std::string& name) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[24];
  snprintf(suffix, sizeof suffix, ".%016" PRIx64, static_cast<uint64_t>(rng()));
  std::string t = ".drpc-";
  t.append(name.substr(0, 200));
  t.append(suffix);
  return t;
}

}  // namespace

grpc::Status FromSanStatus(const Status& s) {
  grpc::StatusCode code = grpc::StatusCode::INTERNAL;
  switch (s.code()) {
    case ENOENT:
      code = grpc::StatusCode::NOT_FOUND;
      break;
    case EEXIST:
      code = grpc::StatusCode::ALREADY_EXISTS;
      break;
    case EPERM:
    case EACCES:
    case EXDEV:
    case ELOOP:
      code = grpc::StatusCode::PERMISSION_DENIED;
      break;
    case EINVAL:
    case EISDIR:
    case ENOTDIR:
    case ENAMETOOLONG:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case ENOSPC:
    case EDQUOT:
    case EAGAIN:
      code = grpc::StatusCode::RESOURCE_EXHAUSTED;
      break;
    default:
      break;
  }
  return grpc::Status(code, s.ToString());
}

Result<std::unique_ptr<PushTarget>> PushTarget::Open(const san::files::Jail& jail,
                                                     const FileHeader& header) {
  Result<std::string> path = CanonicalRemotePath(header.path());
  if (!path.ok()) return path.status();
  std::unique_ptr<PushTarget> t(new PushTarget());
  t->path_ = *path;
  Result<UniqueFd> dir = jail.OpenParent(t->path_, &t->name_);
  if (!dir.ok()) return dir.status();
  t->dir_ = std::move(dir).value();
  // Refused before any byte moves (the rename below is what settles it against a racing push).
  struct stat existing {};
  if (!header.overwrite() &&
      fstatat(t->dir_.get(), t->name_.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0) {
    return Status(EEXIST, "push: the file exists (no overwrite)");
  }
  // The parent is an O_PATH fd, which openat takes as the base of a single-component name.
  t->temp_ = TempName(t->name_);
  t->mode_ = header.mode() ? static_cast<mode_t>(header.mode() & 07777) : 0644;
  t->special_bits_ = (header.mode() & 07000) != 0;
  t->overwrite_ = header.overwrite();
  t->out_.reset(openat(t->dir_.get(), t->temp_.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, t->mode_ & 0777));
  if (!t->out_.valid()) return Status::FromErrno("openat(temporary)");
  return t;
}

PushTarget::~PushTarget() {
  if (committed_) return;
  out_.reset();
  unlinkat(dir_.get(), temp_.c_str(), 0);
}

Status PushTarget::Commit() {
  if (special_bits_) fchmod(out_.get(), mode_);  // setuid etc.: umask-free, explicit
  if (::close(out_.release()) != 0) return Status::FromErrno("close");
  const unsigned flags = overwrite_ ? 0 : RENAME_NOREPLACE;
  if (renameat2(dir_.get(), temp_.c_str(), dir_.get(), name_.c_str(), flags) != 0) {
    return Status::FromErrno("rename");
  }
  committed_ = true;
  return Status::Ok();
}

Result<PullSource> OpenPullSource(const san::files::Jail& jail, const std::string& path) {
  Result<std::string> canonical = CanonicalRemotePath(path);
  if (!canonical.ok()) return canonical.status();
  Result<UniqueFd> in = jail.OpenFile(*canonical, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (!in.ok()) return in.status();
  struct stat st {};
  if (fstat(in->get(), &st) != 0) return Status::FromErrno("fstat");
  if (!S_ISREG(st.st_mode)) return Status(EINVAL, "pull: not a regular file");
  PullSource source;
  source.path = *canonical;
  source.fd = std::move(in).value();
  source.size = static_cast<uint64_t>(st.st_size);
  source.mode = st.st_mode & 07777;
  return source;
}

}  // namespace san::drpc
