#include "node/file_transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <random>

#include "core/checksum.h"
#include "core/remote_path.h"

namespace san::drpc {
namespace {

bool WriteAll(int fd, const char* data, size_t len) {
  while (len > 0) {
    const ssize_t n = ::write(fd, data, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

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

grpc::Status ReceivePush(const san::ftp::Jail& jail, grpc::ServerContext* context,
                         grpc::ServerReader<FileChunk>* reader, PushSummary* summary) {
  FileChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_header()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "push: the first message is the header");
  }
  const FileHeader header = chunk.header();
  Result<std::string> path = CanonicalRemotePath(header.path());
  if (!path.ok()) return FromSanStatus(path.status());
  std::string name;
  Result<UniqueFd> dir = jail.OpenParent(*path, &name);
  if (!dir.ok()) return FromSanStatus(dir.status());
  // The parent is an O_PATH fd, which openat takes as the base of a single-component name.
  const std::string temp = TempName(name);
  const mode_t mode = header.mode() ? static_cast<mode_t>(header.mode() & 07777) : 0644;
  UniqueFd out(openat(dir->get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                      mode & 0777));
  if (!out.valid()) return FromSanStatus(Status::FromErrno("openat(temporary)"));
  auto discard = [&](grpc::Status why) {
    out.reset();
    unlinkat(dir->get(), temp.c_str(), 0);
    return why;
  };
  Checksum sum;
  uint64_t bytes = 0;
  while (reader->Read(&chunk)) {
    if (chunk.kind_case() != FileChunk::kData) {
      return discard(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "push: a second header"));
    }
    const std::string& data = chunk.data();
    if (bytes + data.size() > header.size()) {
      return discard(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "push: more bytes than the header announced"));
    }
    if (!WriteAll(out.get(), data.data(), data.size())) {
      return discard(FromSanStatus(Status::FromErrno("write")));
    }
    sum.Update(data.data(), data.size());
    bytes += data.size();
  }
  if (context->IsCancelled()) {
    return discard(grpc::Status(grpc::StatusCode::CANCELLED, "push: the client went away"));
  }
  if (bytes != header.size()) {
    return discard(grpc::Status(grpc::StatusCode::DATA_LOSS,
                                "push: the stream ended before the announced size"));
  }
  if (header.mode() & 07000) fchmod(out.get(), mode);  // setuid etc.: umask-free, explicit
  if (::close(out.release()) != 0) {
    unlinkat(dir->get(), temp.c_str(), 0);
    return FromSanStatus(Status::FromErrno("close"));
  }
  const unsigned flags = header.overwrite() ? 0 : RENAME_NOREPLACE;
  if (renameat2(dir->get(), temp.c_str(), dir->get(), name.c_str(), flags) != 0) {
    const Status failed = Status::FromErrno("rename");
    unlinkat(dir->get(), temp.c_str(), 0);
    return FromSanStatus(failed);
  }
  summary->set_path(*path);
  summary->set_bytes(bytes);
  summary->set_checksum(sum.value());
  return grpc::Status::OK;
}

grpc::Status SendPull(const san::ftp::Jail& jail, grpc::ServerContext* context,
                      const PullRequest& request, grpc::ServerWriter<FileChunk>* writer) {
  Result<std::string> path = CanonicalRemotePath(request.path());
  if (!path.ok()) return FromSanStatus(path.status());
  Result<UniqueFd> in = jail.OpenFile(*path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
  if (!in.ok()) return FromSanStatus(in.status());
  struct stat st {};
  if (fstat(in->get(), &st) != 0) return FromSanStatus(Status::FromErrno("fstat"));
  if (!S_ISREG(st.st_mode)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "pull: not a regular file");
  }
  FileChunk chunk;
  FileHeader* header = chunk.mutable_header();
  header->set_path(*path);
  header->set_size(static_cast<uint64_t>(st.st_size));
  header->set_mode(st.st_mode & 07777);
  if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  Checksum sum;
  uint64_t sent = 0;
  std::string buffer;
  while (sent < static_cast<uint64_t>(st.st_size)) {
    buffer.resize(kFileChunkBytes);
    const ssize_t n = ::read(in->get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return FromSanStatus(Status::FromErrno("read"));
    }
    if (n == 0) break;  // the file shrank while we sent it: the client sees fewer bytes than size
    buffer.resize(static_cast<size_t>(n));
    sum.Update(buffer.data(), buffer.size());
    sent += static_cast<uint64_t>(n);
    chunk.Clear();
    chunk.set_data(std::move(buffer));
    buffer = std::string();
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  }
  char hex[17];
  snprintf(hex, sizeof hex, "%016" PRIx64, sum.value());
  context->AddTrailingMetadata(kChecksumTrailer, hex);
  if (sent != static_cast<uint64_t>(st.st_size)) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS, "pull: the file changed while it was sent");
  }
  return grpc::Status::OK;
}

}  // namespace san::drpc
