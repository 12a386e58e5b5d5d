// FtpClient: one FTP control connection and its data connections, as a client (RFC 959, 2428,
// 3659), over SAN sockets (net/socket.h): accelerated against a sanlib server on this host, plain
// TCP against any other server.
//
// Calls are synchronous and bounded by options.timeout_ms. After a greeting that lists AUTH SAN in
// FEAT, the control connection is upgraded in band (san_upgrade) unless options say not to.
// Transfers report bytes, seconds and the data path of the data connection (TransferStats).
// Thread-safety: one thread per client. Ownership: owns its sockets.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "net/line_reader.h"
#include "net/socket.h"
#include "protocol/reply.h"

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
  // call returns a status with call() == kInterruptedCall.
  std::function<bool()> interrupted;
};

// Status::call() of a transfer that options.interrupted stopped (code EINTR).
inline constexpr char kInterruptedCall[] = "interrupted";

struct TransferStats {
  uint64_t bytes = 0;  // bytes on the data connection (TYPE A: with the CRs of CRLF)
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
  // Sends one command line and reads its reply. A TYPE command the server accepts (also one sent
  // with `quote`) sets binary().
  Result<Reply> Command(const std::string& line);
  const Reply& last_reply() const { return last_; }
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
  // exact: read nothing past the reply (see LineReader::Next).
  Result<Reply> ReadReply(bool exact = false);
  Status SendLine(const std::string& line);
  // Opens the data connection for one transfer command; returns it after the server's 1xx.
  Result<Socket> StartTransfer(const std::string& command);
  // Closes data, reads the transfer's reply; `st` is how our side of the transfer went (an
  // interrupted one is aborted: AbortTransfer).
  Result<TransferStats> FinishTransfer(Socket data, TransferStats stats, Status st);
  // RFC 959's abort: ABOR on the control connection, then the data connection closed (reset when
  // on TCP), then the transfer's reply and ABOR's. Returns the interrupted status.
  Status AbortTransfer(Socket data);
  bool Interrupted() const { return options_.interrupted && options_.interrupted(); }
  // Waits until s has one of events, bounded by options.timeout_ms: ETIMEDOUT, or the
  // interrupted status when options.interrupted says so after a signal.
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
  Reply last_;
  Reply greeting_;
  Reply aborted_transfer_reply_;
  TransferStats last_stats_;
  bool binary_ = false;  // the TYPE the server last accepted
  bool epsv_failed_ = false;
  bool eprt_failed_ = false;
};

}  // namespace san::ftp
