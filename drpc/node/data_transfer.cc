#include "drpc/node/data_transfer.h"

#include <sys/random.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <optional>

#include "drpc/node/node_file.h"
#include "drpc/transport/acceptor.h"
#include "drpc/transport/data_stream.h"
#include "san/san.h"
#include "sanlib/common/connection_errno.h"

namespace san::drpc {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kConnectWait{30};  // for the client's data connection
constexpr std::chrono::seconds kTicketWait{5};    // for a connection's first bytes

// A SAN socket closed on scope exit.
class SanFd {
 public:
  explicit SanFd(int fd = -1) : fd_(fd) {}
  ~SanFd() { reset(); }
  SanFd(const SanFd&) = delete;
  SanFd& operator=(const SanFd&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) san_close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// The call's deadline on the steady clock (none: max).
Clock::time_point CallDeadline(const grpc::ServerContext& context) {
  const auto system_deadline = context.deadline();
  const auto system_now = std::chrono::system_clock::now();
  if (system_deadline >= system_now + std::chrono::hours(24 * 365)) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(system_deadline - system_now);
}

// A data-path failure as the client should see it.
grpc::Status FromDataStatus(const Status& s) {
  if (s.code() == ECANCELED) return grpc::Status(grpc::StatusCode::CANCELLED, s.ToString());
  if (s.code() == ETIMEDOUT) return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, s.ToString());
  if (s.code() == EFBIG) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, s.ToString());
  if (IsConnectionErrno(s.code())) return grpc::Status(grpc::StatusCode::UNAVAILABLE, s.ToString());
  return FromSanStatus(s);
}

bool SameTicket(const char* a, const char* b) {
  unsigned char diff = 0;  // every byte compared, whatever the first difference
  for (size_t i = 0; i < kTicketBytes; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Listens, offers, and takes the connection that presents the ticket (nonblocking).
Result<int> OpenDataConnection(const std::string& listen_host, const DataWait& call,
                               DataOffer* offer, grpc::ServerWriter<TransferEvent>* writer) {
  uint16_t port = 0;
  Result<int> listening = ListenSan(listen_host, 0, 4, &port);
  if (!listening.ok()) return listening.status();
  SanFd listener(*listening);
  char ticket[kTicketBytes];
  if (getrandom(ticket, sizeof ticket, 0) != static_cast<ssize_t>(sizeof ticket)) {
    return Status::FromErrno("getrandom");
  }
  offer->set_port(port);
  offer->set_ticket(ticket, sizeof ticket);
  TransferEvent event;
  *event.mutable_offer() = *offer;
  if (!writer->Write(event)) return Status(ECANCELED, "transfer: the client went away");
  DataWait accept_wait = call;
  accept_wait.deadline = std::min(call.deadline, Clock::now() + kConnectWait);
  accept_wait.stall = kConnectWait;
  for (int wrong = 0; wrong < kMaxWrongConnections;) {
    if (Status s = WaitReady(listener.get(), POLLIN, accept_wait); !s.ok()) return s;
    SanFd conn(san_accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (conn.get() < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) continue;
      return Status::FromErrno("data connection: accept");
    }
    char got[kTicketBytes];
    DataWait ticket_wait = call;
    ticket_wait.deadline = std::min(call.deadline, Clock::now() + kTicketWait);
    if (ReceiveExactOn(conn.get(), got, sizeof got, ticket_wait).ok() && SameTicket(got, ticket)) {
      return conn.release();
    }
    ++wrong;
  }
  return Status(EACCES, "data connection: too many connections without the ticket");
}

}  // namespace

grpc::Status ServeTransfer(const san::files::Jail& jail, const std::string& listen_host,
                           grpc::ServerContext* context, const TransferRequest& request,
                           grpc::ServerWriter<TransferEvent>* writer) {
  DataWait call;
  call.cancelled = [context] { return context->IsCancelled(); };
  call.deadline = CallDeadline(*context);
  const FileHeader& header = request.header();
  std::unique_ptr<PushTarget> target;  // push
  std::optional<PullSource> source;    // pull
  DataOffer offer;
  if (request.pull()) {
    Result<PullSource> opened = OpenPullSource(jail, header.path());
    if (!opened.ok()) return FromSanStatus(opened.status());
    source = std::move(opened).value();
    offer.set_size(source->size);
    offer.set_mode(source->mode);
  } else {
    Result<std::unique_ptr<PushTarget>> opened = PushTarget::Open(jail, header);
    if (!opened.ok()) return FromSanStatus(opened.status());
    target = std::move(opened).value();
  }
  Result<int> data = OpenDataConnection(listen_host, call, &offer, writer);
  if (!data.ok()) return FromDataStatus(data.status());
  SanFd conn(*data);
  TransferEvent done;
  PushSummary* summary = done.mutable_done();
  if (request.pull()) {
    if (Status s = SendFileOn(conn.get(), source->fd.get(), source->size, call); !s.ok()) {
      return s.code() == ENODATA ? grpc::Status(grpc::StatusCode::DATA_LOSS,
                                                "pull: the file changed while it was sent")
                                 : FromDataStatus(s);
    }
    san_shutdown(conn.get(), SHUT_WR);
    summary->set_path(source->path);
    summary->set_bytes(source->size);
  } else {
    Result<uint64_t> got = ReceiveFileOn(conn.get(), target->fd(), header.size(), call);
    if (!got.ok()) return FromDataStatus(got.status());
    if (*got != header.size()) {
      return grpc::Status(grpc::StatusCode::DATA_LOSS,
                          "push: the data connection ended after " + std::to_string(*got) + " of " +
                              std::to_string(header.size()) + " bytes");
    }
    if (Status committed = target->Commit(); !committed.ok()) return FromSanStatus(committed);
    summary->set_path(target->path());
    summary->set_bytes(*got);
  }
  conn.reset();
  if (!writer->Write(done)) return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  return grpc::Status::OK;
}

}  // namespace san::drpc
