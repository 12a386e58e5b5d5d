// FtpClient: one FTP control connection and its data connections, as a client (RFC 959, 2428,
// 3659), over SAN sockets (ftp/net/socket.h): accelerated against a sanlib server on this host,
// plain TCP against any other server.
//
// Calls are synchronous and bounded by options.timeout_ms. After a greeting that lists AUTH SAN in
// FEAT, the control connection is upgraded in band (san_upgrade) unless options say not to.
// Transfers report bytes, seconds and the data path of the data connection (TransferStats).
//
// Invariant: the replies stay in step with the commands. A reply not waited for to the end
// (options.interrupted stopped the wait, or it timed out) stays owed (OwedReplies); the next
// Command first reads and drops the owed replies, and if they do not come within the timeout the
// control connection is closed rather than a late reply taken for the next command's.
// Thread-safety: one thread per client. Ownership: owns its sockets.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ftp/net/line_reader.h"
#include "ftp/net/socket.h"
#include "ftp/protocol/reply.h"
#include "ftp_client/owed_replies.h"

namespace san::ftp {

struct ClientOptions {
  bool passive = true;      // PASV/EPSV (else PORT/EPRT)
  bool san_upgrade = true;  // AUTH SAN when the server offers it
  bool verbose = false;     // the dialogue on stderr
  int timeout_ms = 30000;
  // Called with the running byte count during transfers (hash marks, progress bar).
  std::function<void(uint64_t)> progress;
  // Polled during transfers (between chunks, and when a wait is interrupted by a signal): true
  // stops the transfer -- ABOR, the data connection closed, the server's replies read -- and the
  // call returns a status with call() == kInterruptedCall. Polled as well while a command waits
  // for its reply: true ends the wait at once with call() == kReplyInterruptedCall, the reply
  // left owed (skipped by the next command).
  std::function<bool()> interrupted;
  // Readable when `interrupted` may have turned true (a signal handler's self-pipe), or -1: every
  // network wait polls it beside its socket, so a signal that lands just before a wait begins
  // still ends that wait. The client never reads it.
  int interrupt_fd = -1;
};

// Status::call() of a transfer that options.interrupted stopped (code EINTR).
inline constexpr char kInterruptedCall[] = "interrupted";
// Status::call() of a command whose wait for its reply options.interrupted stopped (code EINTR);
// the reply is owed. Also of a command not sent because options.interrupted said true already,
// and of a transfer stopped before it began (before the server's 1xx): the command is then
// aborted (ABOR) without waiting, and both replies are owed.
inline constexpr char kReplyInterruptedCall[] = "interrupted waiting for the reply";
// Status::call() when the replies owed to interrupted commands did not come within the timeout
// (ETIMEDOUT) and the control connection was closed.
inline constexpr char kOwedReplyCall[] = "reply owed to an interrupted command";

struct TransferStats {
  uint64_t bytes = 0;  // bytes on the data connection (TYPE A: with the CRs of CRLF)
  // From the transfer command to the server's final reply (226): an upload is done when the server
  // says its file is complete, not when our last byte leaves.
  double seconds = 0;
  std::string data_path;  // "shm", "tcp (...)"
};

class FtpClient {
 public:
  explicit FtpClient(ClientOptions options) : options_(std::move(options)) {}

  // Connects and reads the greeting (and upgrades the control connection if offered).
  Status Open(const std::string& host, uint16_t port);
  bool connected() const { return control_.valid(); }
  Status Login(const std::string& user, const std::string& password);
  // Sends one command line and reads its reply, after the replies owed to earlier commands. A
  // TYPE command the server accepts (also one sent with `quote`) sets binary().
  Result<Reply> Command(const std::string& line);
  // The next reply on the control connection (after a Command answered with a 1xx: its final
  // reply), interruptible like Command.
  Result<Reply> NextReply() { return ReadReply(Wakeable::kYes); }
  // The last reply read, normally the last command's; code 0 when that command got none.
  const Reply& last_reply() const { return last_; }
  // Final replies owed to commands whose wait ended early (read and dropped by the next Command).
  int owed_replies() const { return owed_.owed(); }
  const Reply& greeting() const { return greeting_; }
  void Close();

  // TYPE I (binary) or TYPE A. A new session is in TYPE A, RFC 959's default.
  Status SetBinary(bool binary);
  bool binary() const { return binary_; }
  // RETR remote into fd (from offset with REST when offset > 0). TYPE A: CRLF -> LF.
  // A failure of the local file is reported with call() == kLocalFileCall.
  Result<TransferStats> Retrieve(const std::string& remote, int fd, uint64_t offset = 0);
  // STOR (or APPE, or REST+STOR when offset > 0) from fd. TYPE A: LF -> CRLF.
  Result<TransferStats> Store(const std::string& remote, int fd, bool append = false,
                              uint64_t offset = 0);
  // LIST / NLST / MLSD output as text.
  Result<TransferStats> List(const std::string& verb, const std::string& path, std::string* out);

  // The last transfer's figures, also of one that failed or was interrupted (bytes moved so far).
  const TransferStats& last_stats() const { return last_stats_; }
  // After an interrupted transfer: the server's reply to the transfer itself (426, or 226 if it
  // had finished); last_reply() is then the reply to ABOR. code 0 if none came.
  const Reply& aborted_transfer_reply() const { return aborted_transfer_reply_; }

  std::string control_mode() const { return control_.Mode(); }
  ClientOptions& options() { return options_; }

 private:
  enum class Wakeable { kYes, kNo };
  // The next reply, each wait bounded by options.timeout_ms. kYes: options.interrupted ends the
  // wait (kReplyInterruptedCall); kNo: only the timeout does. A malformed reply or a broken
  // connection closes the control connection. exact: read nothing past the reply (see
  // LineReader::Next).
  Result<Reply> ReadReply(Wakeable wakeable, bool exact = false);
  // Reads and drops the replies owed (OwedReplies) before a new command. On a timeout or a
  // connection error the control connection is closed; a new interrupt leaves them owed.
  Status CatchUp();
  // One command line out; the command then owes a reply. A failure closes the connection (the
  // line may have gone out in part).
  Status SendLine(const std::string& line);
  // Opens the data connection for one transfer command; returns it after the server's 1xx.
  Result<Socket> StartTransfer(const std::string& command);
  // Closes data, reads the transfer's reply, and times the transfer from `start` to that reply;
  // `st` is how our side of the transfer went (an interrupted one is aborted: AbortTransfer).
  Result<TransferStats> FinishTransfer(Socket data, TransferStats stats, Status st,
                                       std::chrono::steady_clock::time_point start);
  // RFC 959's abort: ABOR on the control connection, then the data connection closed (reset when
  // on TCP), then the transfer's reply and ABOR's. Returns the interrupted status.
  Status AbortTransfer(Socket data);
  // A transfer command interrupted before its 1xx: ABOR sent (not waited for), data closed (reset
  // on TCP); the replies are left owed.
  void AbandonTransfer(Socket data);
  bool Interrupted() const { return options_.interrupted && options_.interrupted(); }
  // Waits until s has one of events, bounded by options.timeout_ms: ETIMEDOUT, or the
  // interrupted status (kInterruptedCall) when options.interrupted says so.
  Status Wait(const Socket& s, short events) const;
  // The bytes of a RETR into fd: through san_recvfile (binary, where sanlib has it) or a buffer.
  Status ReceiveBinary(const Socket& data, int fd, TransferStats* stats);
  Status ReceiveBuffered(const Socket& data, int fd, bool ascii, TransferStats* stats);
  // The bytes of a STOR from fd (from its position): binary with san_sendfile; TYPE A encoded.
  Status SendBinary(const Socket& data, int fd, TransferStats* stats);
  Status SendAscii(const Socket& data, int fd, TransferStats* stats);

  ClientOptions options_;
  Socket control_;
  std::optional<LineReader> reader_;
  OwedReplies owed_;
  Reply last_;
  Reply greeting_;
  Reply aborted_transfer_reply_;
  TransferStats last_stats_;
  bool binary_ = false;  // the TYPE the server last accepted
  bool epsv_failed_ = false;
  bool eprt_failed_ = false;
};

}  // namespace san::ftp
