#include "drpc/node/file_transfer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "drpc/core/checksum.h"
#include "files/write_all.h"

namespace san::drpc {
grpc::Status ReceivePush(const san::files::Jail& jail, grpc::ServerContext* context,
                         grpc::ServerReader<FileChunk>* reader, PushSummary* summary) {
  FileChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_header()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "push: the first message is the header");
  }
  const FileHeader header = chunk.header();
  Result<std::unique_ptr<PushTarget>> target = PushTarget::Open(jail, header);
  if (!target.ok()) return FromSanStatus(target.status());
  Checksum sum;
  uint64_t bytes = 0;
  while (reader->Read(&chunk)) {
    if (chunk.kind_case() != FileChunk::kData) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "push: a second header");
    }
    const std::string& data = chunk.data();
    if (bytes + data.size() > header.size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "push: more bytes than the header announced");
    }
    if (!files::WriteAll((*target)->fd(), data.data(), data.size())) {
      return FromSanStatus(Status::FromErrno("write"));
    }
    sum.Update(data.data(), data.size());
    bytes += data.size();
  }
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "push: the client went away");
  }
  if (bytes != header.size()) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS,
                        "push: the stream ended before the announced size");
  }
  if (Status committed = (*target)->Commit(); !committed.ok()) return FromSanStatus(committed);
  summary->set_path((*target)->path());
  summary->set_bytes(bytes);
  summary->set_checksum(sum.value());
  return grpc::Status::OK;
}

grpc::Status SendPull(const san::files::Jail& jail, grpc::ServerContext* context,
                      const PullRequest& request, grpc::ServerWriter<FileChunk>* writer) {
  Result<PullSource> source = OpenPullSource(jail, request.path());
  if (!source.ok()) return FromSanStatus(source.status());
  const uint64_t size = source->size;
  FileChunk chunk;
  FileHeader* header = chunk.mutable_header();
  header->set_path(source->path);
  header->set_size(size);
  header->set_mode(source->mode);
  if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  Checksum sum;
  uint64_t sent = 0;
  std::string buffer;
  while (sent < size) {
    buffer.resize(kFileChunkBytes);
    const ssize_t n = ::read(source->fd.get(), buffer.data(), buffer.size());
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
  if (sent != size) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS, "pull: the file changed while it was sent");
  }
  return grpc::Status::OK;
}

}  // namespace san::drpc
