#include "drpc/client/data_transfer.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

#include "drpc/client/commands.h"
#include "drpc/client/file_push.h"
#include "drpc/client/part_file.h"
#include "drpc/proto/transfer.h"
#include "drpc/transport/channel.h"
#include "drpc/transport/data_stream.h"
#include "san/san.h"
#include "sanlib/common/unique_fd.h"

namespace san::drpc {
namespace {

using Clock = std::chrono::steady_clock;

// One Transfer call: started, its offer read; then its summary and status.
class TransferCall {
 public:
  TransferCall(const CallSettings& settings, const char* what) : what_(what) {
    ctx_ = MakeContext(settings, settings.timeout_ms);
    wait_.deadline = Clock::now() + std::chrono::milliseconds(settings.timeout_ms);
  }
  ~TransferCall() {
    CloseData();
    if (reader_) {
      ctx_->TryCancel();
      reader_->Finish();
    }
  }

  // Starts the call and reads the offer.
  DataOutcome Begin(Node::Stub* stub, const TransferRequest& request, std::string* error) {
    reader_ = stub->Transfer(ctx_.get(), request);
    TransferEvent event;
    if (reader_->Read(&event) && event.has_offer()) {
      offer_ = event.offer();
      return DataOutcome::kDone;
    }
    const grpc::Status s = reader_->Finish();
    reader_.reset();
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) return DataOutcome::kNotServed;
    *error = std::string(what_) + ": " + (s.ok() ? "the node made no offer" : DescribeStatus(s));
    return DataOutcome::kFailed;
  }

  // Opens the data connection to the offered port and sends the ticket: kDone, kUnreachable (no
  // connection could be made) or kFailed.
  DataOutcome Connect(const Target& target, uint32_t connect_timeout_ms, std::string* error) {
    if (offer_.port() == 0 || offer_.port() > 65535 || offer_.ticket().size() != kTicketBytes) {
      Cancel("the node's offer is malformed", error);
      return DataOutcome::kFailed;
    }
    Target data_target = target;
    data_target.port = static_cast<uint16_t>(offer_.port());
    std::string why;
    data_ = ConnectTarget(data_target, connect_timeout_ms, &why);
    if (data_ < 0) {
      Cancel("data connection: " + why, error);
      return DataOutcome::kUnreachable;
    }
    const Status sent = SendAllOn(data_, offer_.ticket().data(), offer_.ticket().size(), wait_);
    if (sent.ok()) return DataOutcome::kDone;
    Cancel(sent.ToString(), error);
    return DataOutcome::kFailed;
  }

  // The bytes moved: closes the data connection, then reads the summary and the status.
  bool End(uint64_t expect, std::string* error) {
    CloseData();
    TransferEvent event;
    const bool summary = reader_->Read(&event) && event.has_done();
    const grpc::Status s = reader_->Finish();
    reader_.reset();
    if (!s.ok()) {
      *error = std::string(what_) + ": " + DescribeStatus(s);
      return false;
    }
    if (!summary || event.done().bytes() != expect) {
      *error = std::string(what_) + ": the node reports " +
               (summary ? std::to_string(event.done().bytes()) : std::string("no")) + " bytes, " +
               std::to_string(expect) + " moved";
      return false;
    }
    return true;
  }

  // A data-connection failure: the call's status says more if the node ended it (no space, a
  // file that changed); otherwise the data connection's own error.
  void Failed(const std::string& data_error, std::string* error) {
    CloseData();
    TransferEvent event;
    while (reader_->Read(&event)) {
    }
    const grpc::Status s = reader_->Finish();
    reader_.reset();
    *error = std::string(what_) + ": " + (s.ok() ? data_error : DescribeStatus(s));
  }

  // A failure the node cannot know of yet (it waits for the data connection): the call is
  // cancelled rather than waited for.
  void Cancel(const std::string& data_error, std::string* error) {
    CloseData();
    ctx_->TryCancel();
    reader_->Finish();
    reader_.reset();
    *error = std::string(what_) + ": " + data_error;
  }

  const DataOffer& offer() const { return offer_; }
  int data() const { return data_; }
  const DataWait& wait() const { return wait_; }

 private:
  void CloseData() {
    if (data_ >= 0) san_close(data_);
    data_ = -1;
  }

  const char* what_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReader<TransferEvent>> reader_;
  DataOffer offer_;
  DataWait wait_;
  int data_ = -1;
};

}  // namespace

DataOutcome PushOnDataConnection(Node::Stub* stub, const Target& target,
                                 const CallSettings& settings, const std::string& local,
                                 const std::string& remote, uint32_t mode, bool overwrite,
                                 uint64_t* bytes, std::string* error) {
  UniqueFd in;
  TransferRequest request;
  if (!OpenLocalPush(local, remote, mode, overwrite, &in, request.mutable_header(), error)) {
    return DataOutcome::kFailed;
  }
  const uint64_t size = request.header().size();
  TransferCall call(settings, "push");
  if (DataOutcome begun = call.Begin(stub, request, error); begun != DataOutcome::kDone) {
    return begun;
  }
  if (DataOutcome c = call.Connect(target, settings.connect_timeout_ms, error);
      c != DataOutcome::kDone) {
    return c;
  }
  if (Status s = SendFileOn(call.data(), in.get(), size, call.wait()); !s.ok()) {
    std::string what = s.ToString();
    if (s.code() == ENODATA) what = local + " shrank while it was sent";
    call.Failed(what, error);
    return DataOutcome::kFailed;
  }
  if (!call.End(size, error)) return DataOutcome::kFailed;
  *bytes = size;
  return DataOutcome::kDone;
}

DataOutcome PullOnDataConnection(Node::Stub* stub, const Target& target,
                                 const CallSettings& settings, const std::string& remote,
                                 const std::string& local, uint64_t* bytes, std::string* error) {
  TransferRequest request;
  request.set_pull(true);
  request.mutable_header()->set_path(remote);
  TransferCall call(settings, "pull");
  if (DataOutcome begun = call.Begin(stub, request, error); begun != DataOutcome::kDone) {
    return begun;
  }
  Result<PartFile> part = PartFile::Create(local);
  if (!part.ok()) {
    *error = "pull: " + local + ".drpc-part: " + strerror(part.status().code());
    return DataOutcome::kFailed;
  }
  if (DataOutcome c = call.Connect(target, settings.connect_timeout_ms, error);
      c != DataOutcome::kDone) {
    return c;
  }
  const uint64_t size = call.offer().size();
  Result<uint64_t> got = ReceiveFileOn(call.data(), part->fd(), size, call.wait());
  if (!got.ok()) {
    call.Failed(got.status().ToString(), error);
    return DataOutcome::kFailed;
  }
  if (*got != size) {
    call.Failed("received " + std::to_string(*got) + " of " + std::to_string(size) + " bytes",
                error);
    return DataOutcome::kFailed;
  }
  if (!call.End(size, error)) return DataOutcome::kFailed;
  if (!part->Commit(error)) {
    *error = "pull: " + *error;
    return DataOutcome::kFailed;
  }
  *bytes = size;
  return DataOutcome::kDone;
}

}  // namespace san::drpc
