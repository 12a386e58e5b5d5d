#include "drpc/client/file_push.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/completion_queue.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "drpc/client/commands.h"
#include "drpc/core/checksum.h"
#include "drpc/proto/drpc_proto.h"
#include "drpc/proto/transfer.h"
#include "sanlib/common/unique_fd.h"

namespace san::drpc {
namespace {

// The tags of the call's operations; only one is ever outstanding.
enum Op : intptr_t { kStart = 1, kWrite, kWritesDone, kRead, kFinish };

void* Tag(Op op) { return reinterpret_cast<void*>(op); }

// Waits for the one outstanding operation; false if it failed (the stream is broken: Finish
// tells why).
bool Await(grpc::CompletionQueue* cq, Op op) {
  void* got = nullptr;
  bool ok = false;
  return cq->Next(&got, &ok) && got == Tag(op) && ok;
}

// A chunk read from the file into a malloc'd buffer that gRPC frees once it has sent it. (A pool
// of buffers reused while still in cache was tried: no measurable gain, the read's copy from the
// page cache is what costs.)
struct Chunk {
  char* data = nullptr;
  size_t len = 0;
  int error = 0;  // errno of a failed read
};

Chunk ReadChunk(int fd, size_t want, Checksum* sum) {
  Chunk c;
  if (want == 0) return c;
  c.data = static_cast<char*>(malloc(want));
  if (!c.data) {
    c.error = ENOMEM;
    return c;
  }
  while (c.len < want) {
    const ssize_t n = ::read(fd, c.data + c.len, want - c.len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      c.error = errno;
      break;
    }
    if (n == 0) break;  // the file shrank: the node sees fewer bytes than announced and refuses
    c.len += static_cast<size_t>(n);
  }
  if (c.error != 0 || c.len == 0) {
    free(c.data);
    c.data = nullptr;
    c.len = 0;
    return c;
  }
  sum->Update(c.data, c.len);
  return c;
}

// FileChunk{data: bytes}: the framing protobuf writes (field 2, length-delimited), then the
// bytes themselves, handed over without a copy.
grpc::ByteBuffer DataMessage(Chunk* c) {
  unsigned char framing[11];
  size_t n = 0;
  framing[n++] = 0x12;
  for (uint64_t v = c->len;; v >>= 7) {
    if (v < 0x80) {
      framing[n++] = static_cast<unsigned char>(v);
      break;
    }
    framing[n++] = static_cast<unsigned char>(v | 0x80);
  }
  grpc::Slice slices[2] = {grpc::Slice(framing, n), grpc::Slice(c->data, c->len, free)};
  c->data = nullptr;  // gRPC's now
  return grpc::ByteBuffer(slices, 2);
}

grpc::ByteBuffer HeaderMessage(const FileHeader& header) {
  FileChunk chunk;
  *chunk.mutable_header() = header;
  const std::string bytes = chunk.SerializeAsString();
  grpc::Slice slice(bytes.data(), bytes.size());
  return grpc::ByteBuffer(&slice, 1);
}

bool ParseSummary(const grpc::ByteBuffer& reply, PushSummary* summary) {
  std::vector<grpc::Slice> slices;
  if (!reply.Dump(&slices).ok()) return false;
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return summary->ParseFromString(bytes);
}

}  // namespace

bool OpenLocalPush(const std::string& local, const std::string& remote, uint32_t mode,
                   bool overwrite, UniqueFd* in, FileHeader* header, std::string* error) {
  in->reset(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!in->valid() || fstat(in->get(), &st) != 0) {
    *error = "push: " + local + ": " + strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "push: " + local + ": not a regular file";
    return false;
  }
  header->set_path(remote);
  header->set_mode(mode);
  header->set_overwrite(overwrite);
  header->set_size(static_cast<uint64_t>(st.st_size));
  return true;
}

bool PushFile(const std::shared_ptr<grpc::Channel>& channel, const CallSettings& settings,
              const std::string& local, const std::string& remote, uint32_t mode, bool overwrite,
              uint64_t* bytes, std::string* error) {
  UniqueFd in;
  FileHeader header;
  if (!OpenLocalPush(local, remote, mode, overwrite, &in, &header, error)) return false;
  const uint64_t size = header.size();
  posix_fadvise(in.get(), 0, 0, POSIX_FADV_SEQUENTIAL);

  auto ctx = MakeContext(settings, settings.timeout_ms);
  grpc::CompletionQueue cq;
  grpc::GenericStub stub(channel);
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(ctx.get(), kPushMethod, &cq);
  call->StartCall(Tag(kStart));
  bool open = Await(&cq, kStart);
  if (open) {
    call->Write(HeaderMessage(header), Tag(kWrite));
    open = Await(&cq, kWrite);
  }
  Checksum sum;
  uint64_t sent = 0;
  int read_error = 0;
  // The next chunk is read and checksummed while gRPC sends the one before.
  auto next_size = [&] {
    return static_cast<size_t>(std::min<uint64_t>(kFileChunkBytes, size - sent));
  };
  Chunk next = open ? ReadChunk(in.get(), next_size(), &sum) : Chunk{};
  while (open && next.len > 0) {
    sent += next.len;
    call->Write(DataMessage(&next), Tag(kWrite));
    next = ReadChunk(in.get(), next_size(), &sum);
    open = Await(&cq, kWrite);
  }
  free(next.data);  // a chunk read when the stream broke
  read_error = next.error;
  grpc::ByteBuffer reply;
  bool replied = false;
  if (open && read_error != 0) {
    ctx->TryCancel();  // the node must not keep a file we could not read whole
  } else if (open) {
    call->WritesDone(Tag(kWritesDone));
    if (Await(&cq, kWritesDone)) {
      call->Read(&reply, Tag(kRead));
      replied = Await(&cq, kRead);
    }
  }
  grpc::Status status;
  call->Finish(&status, Tag(kFinish));
  const bool finished = Await(&cq, kFinish);
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  if (read_error != 0) {
    *error = "push: " + local + ": " + strerror(read_error);
    return false;
  }
  if (!finished || !status.ok()) {
    *error =
        "push: " + (finished ? DescribeStatus(status) : std::string("the call did not finish"));
    return false;
  }
  PushSummary summary;
  if (!replied || !ParseSummary(reply, &summary)) {
    *error = "push: the node's reply is not a summary";
    return false;
  }
  if (summary.bytes() != sent || summary.checksum() != sum.value()) {
    *error = "push: the node's byte count or checksum differs from what was sent";
    return false;
  }
  *bytes = sent;
  return true;
}

}  // namespace san::drpc
