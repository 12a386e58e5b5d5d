#include "ftp_client/client.h"

#include <netdb.h>
#include <poll.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "files/write_all.h"
#include "ftp/protocol/ascii.h"
#include "san/san.h"

namespace san::ftp {
namespace {

constexpr size_t kChunk = 256 * 1024;
// One san_recvfile / san_sendfile asks for this much: the bytes go between the channel and the
// file without a buffer of ours, so the size only bounds how often progress is reported and how
// soon an interrupt is seen while the data flows.
constexpr size_t kFileChunk = 1024 * 1024;

double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

HostPort WithPort(HostPort hp, uint16_t port) {
  if (hp.family() == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&hp.addr)->sin_port = htons(port);
  } else {
    reinterpret_cast<sockaddr_in6*>(&hp.addr)->sin6_port = htons(port);
  }
  return hp;
}

// All of p[0, n) to the local file; its error reported as kLocalFileCall.
Status WriteLocal(int fd, const char* p, size_t n) {
  return files::WriteAll(fd, p, n) ? Status::Ok() : Status(errno, kLocalFileCall);
}

}  // namespace

Status FtpClient::Open(const std::string& host, uint16_t port) {
  Close();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &res) != 0 || !res) {
    return Status(EHOSTUNREACH, "getaddrinfo");
  }
  Status last(ECONNREFUSED, "connect");
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    Result<Socket> s =
        Socket::Connect(MakeHostPort(ai->ai_addr, ai->ai_addrlen), options_.timeout_ms);
    if (s.ok()) {
      control_ = std::move(s.value());
      break;
    }
    last = s.status();
  }
  freeaddrinfo(res);
  if (!control_.valid()) return last;
  binary_ = false;  // RFC 959: a session starts in TYPE A
  control_.SetNoDelay();
  reader_.emplace(control_, 64 * 1024);
  owed_.CommandSent();  // the greeting
  // An interrupt while the session is being set up leaves nothing worth keeping: after AUTH SAN
  // the stream is not even known to be FTP any more. The connection is closed.
  Result<Reply> greeting = ReadReply(Wakeable::kYes);
  if (!greeting.ok()) {
    Close();
    return greeting.status();
  }
  greeting_ = greeting.value();
  if (greeting->code != 220) {
    Close();
    return Status(ECONNREFUSED, "server refused the session");
  }
  if (options_.san_upgrade && !control_.Accelerated()) {
    Result<Reply> feat = Command("FEAT");
    if (!feat.ok() && strcmp(feat.status().call(), kReplyInterruptedCall) == 0) {
      Close();
      return feat.status();
    }
    if (feat.ok() && feat->code == 211 && feat->text.find("AUTH SAN") != std::string::npos) {
      // The server starts the upgrade right behind its 234: read exactly the reply.
      const Status sent = SendLine("AUTH SAN");
      Result<Reply> auth = sent.ok() ? ReadReply(Wakeable::kYes, true) : Result<Reply>(sent);
      if (!auth.ok() && strcmp(auth.status().call(), kReplyInterruptedCall) == 0) {
        Close();
        return auth.status();
      }
      if (auth.ok() && auth->code == 234 && reader_->buffered() == 0) {
        const Status up = control_.Upgrade();
        if (options_.verbose) {
          fprintf(stderr, "--- control connection: %s\n",
                  up.ok() ? control_.Mode().c_str() : up.ToString().c_str());
        }
      }
    }
  }
  return Status::Ok();
}

void FtpClient::Close() {
  reader_.reset();
  control_.Close();
  owed_.Reset();
}

Status FtpClient::SendLine(const std::string& line) {
  if (options_.verbose) {
    fprintf(stderr, "---> %s\n", line.rfind("PASS ", 0) == 0 ? "PASS XXXX" : line.c_str());
  }
  std::string wire = line;
  wire.append("\r\n");
  const Status st = control_.SendAll(wire, options_.timeout_ms);
  if (!st.ok()) {
    Close();
    return st;
  }
  owed_.CommandSent();
  return st;
}

Result<Reply> FtpClient::ReadReply(Wakeable wakeable, bool exact) {
  if (!reader_) return Status(ENOTCONN, "not connected");
  // Wakeable: the reader only takes what has arrived (a zero timeout keeps a partial line
  // buffered) and the waiting is done in Wait, which an interrupt ends. Lines already read stay
  // in owed_, so a reply abandoned halfway is finished by the next read.
  const int timeout_ms = wakeable == Wakeable::kYes ? 0 : options_.timeout_ms;
  std::string line;
  while (true) {
    const LineReader::Outcome got = reader_->Next(timeout_ms, &line, exact);
    if (got == LineReader::Outcome::kTimeout) {
      if (wakeable == Wakeable::kNo) return Status(ETIMEDOUT, "reply");
      const Status waited = Wait(control_, POLLIN);
      if (waited.ok()) continue;
      if (waited.code() == ETIMEDOUT) return Status(ETIMEDOUT, "reply");
      if (strcmp(waited.call(), kInterruptedCall) == 0) return Status(EINTR, kReplyInterruptedCall);
      Close();
      return waited;
    }
    if (got != LineReader::Outcome::kLine) {
      Close();
      return Status(ECONNRESET, "control connection closed");
    }
    if (options_.verbose) fprintf(stderr, "%s\n", line.c_str());
    const OwedReplies::Fed fed = owed_.Feed(line);
    if (fed == OwedReplies::Fed::kBad) {
      Close();  // which reply answers which command can no longer be told
      return Status(EPROTO, "malformed reply");
    }
    if (fed == OwedReplies::Fed::kReply) {
      last_ = owed_.reply();
      if (last_.code == 421) Close();  // the server is closing the control connection
      return last_;
    }
  }
}

Status FtpClient::CatchUp() {
  while (owed_.owed() > 0) {
    Result<Reply> r = ReadReply(Wakeable::kYes);
    if (r.ok()) continue;
    const Status& st = r.status();
    if (strcmp(st.call(), kReplyInterruptedCall) == 0) return st;
    Close();
    return st.code() == ETIMEDOUT ? Status(ETIMEDOUT, kOwedReplyCall) : st;
  }
  if (!control_.valid()) return Status(ECONNRESET, "control connection closed");  // 421
  return Status::Ok();
}

Result<Reply> FtpClient::Command(const std::string& line) {
  if (!control_.valid()) return Status(ENOTCONN, "not connected");
  Status st = CatchUp();
  last_ = Reply{};  // from here on, last_reply() is this command's (code 0: none came)
  if (!st.ok()) return st;
  // A Ctrl-C already seen stops a sequence of commands (USER, PASS, SYST) before the next one.
  if (Interrupted()) return Status(EINTR, kReplyInterruptedCall);
  st = SendLine(line);
  if (!st.ok()) return st;
  Result<Reply> r = ReadReply(Wakeable::kYes);
  // TYPE I, TYPE L 8 and TYPE A [N] (any case, RFC 959's form) switch our side too once accepted.
  if (r.ok() && r->code == 200 && line.size() > 5 && strncasecmp(line.c_str(), "TYPE ", 5) == 0) {
    const char t = static_cast<char>(toupper(static_cast<unsigned char>(line[5])));
    if (t == 'I' || t == 'L') binary_ = true;
    if (t == 'A') binary_ = false;
  }
  return r;
}

Status FtpClient::Login(const std::string& user, const std::string& password) {
  Result<Reply> r = Command("USER " + user);
  if (!r.ok()) return r.status();
  if (r->code == 331 || r->code == 332) r = Command("PASS " + password);
  if (!r.ok()) return r.status();
  if (r->code != 230 && r->code != 202) return Status(EACCES, "login");
  return Status::Ok();
}

Status FtpClient::SetBinary(bool binary) {
  Result<Reply> r = Command(binary ? "TYPE I" : "TYPE A");
  if (!r.ok()) return r.status();
  return r->code == 200 ? Status::Ok() : Status(EPROTO, "TYPE");
}

Result<Socket> FtpClient::StartTransfer(const std::string& command) {
  const HostPort server = control_.PeerAddress();
  Socket data;
  Socket listener;
  if (options_.passive) {
    std::optional<HostPort> where;
    if (!epsv_failed_) {
      Result<Reply> r = Command("EPSV");
      if (!r.ok()) return r.status();
      if (r->code == 229) {
        if (auto port = ParseEpsvReply(r->text)) where = WithPort(server, *port);
      } else {
        epsv_failed_ = true;
      }
    }
    if (!where) {
      Result<Reply> r = Command("PASV");
      if (!r.ok()) return r.status();
      std::optional<HostPort> pasv = r->code == 227 ? ParsePasvReply(r->text) : std::nullopt;
      if (!pasv) return Status(EPROTO, "PASV refused");
      // The address in 227 may be a private or wrong one (NAT): use the control peer's, as curl
      // and lftp do, with the offered port.
      where = WithPort(server, pasv->port());
    }
    Result<Socket> s = Socket::Connect(*where, options_.timeout_ms);
    // A Ctrl-C that ended the connect: nothing is owed yet (the transfer command is not sent).
    if (!s.ok() && Interrupted()) return Status(EINTR, kReplyInterruptedCall);
    if (!s.ok()) return s.status();
    data = std::move(s.value());
  } else {
    Result<Socket> l = Socket::Listen(WithPort(control_.LocalAddress(), 0), 1);
    if (!l.ok()) return l.status();
    listener = std::move(l.value());
    const HostPort me = listener.LocalAddress();
    bool sent = false;
    if (!eprt_failed_) {
      Result<Reply> r = Command("EPRT " + FormatEprtArg(me));
      if (!r.ok()) return r.status();
      if (r->code == 200) {
        sent = true;
      } else {
        eprt_failed_ = true;
      }
    }
    if (!sent) {
      if (me.family() != AF_INET) return Status(EAFNOSUPPORT, "PORT needs IPv4");
      Result<Reply> r = Command("PORT " + FormatPortArg(me));
      if (!r.ok()) return r.status();
      if (r->code != 200) return Status(EPROTO, "PORT refused");
    }
  }
  Result<Reply> r = Command(command);
  if (!r.ok()) {
    if (strcmp(r.status().call(), kReplyInterruptedCall) == 0) AbandonTransfer(std::move(data));
    return r.status();
  }
  if (!r->positive_preliminary()) return Status(EPROTO, "transfer refused");
  if (!options_.passive) {
    // Waited for in Wait, which a Ctrl-C ends; the transfer's final reply stays owed if the
    // server does not connect.
    const Status waited = Wait(listener, POLLIN);
    if (!waited.ok() && strcmp(waited.call(), kInterruptedCall) == 0) {
      listener.Close();
      AbandonTransfer(Socket());
      return Status(EINTR, kReplyInterruptedCall);
    }
    if (!waited.ok()) return waited;
    Result<Socket> s = listener.Accept(0);
    if (!s.ok()) return s.status();
    data = std::move(s.value());
  }
  return data;
}

Result<TransferStats> FtpClient::FinishTransfer(Socket data, TransferStats stats, Status st,
                                                std::chrono::steady_clock::time_point start) {
  stats.data_path = data.Mode();
  stats.seconds = Since(start);
  last_stats_ = stats;
  if (!st.ok() && strcmp(st.call(), kInterruptedCall) == 0) return AbortTransfer(std::move(data));
  data.Close();  // also what tells the server that a failed download ends here
  Result<Reply> r = ReadReply(Wakeable::kYes);
  stats.seconds = last_stats_.seconds = Since(start);
  if (!st.ok()) return st;
  if (!r.ok()) return r.status();
  if (r->code != 226 && r->code != 250) return Status(EIO, "transfer failed");
  return stats;
}

Status FtpClient::AbortTransfer(Socket data) {
  const Status interrupted(EINTR, kInterruptedCall);
  aborted_transfer_reply_ = Reply{};
  // ABOR before the data connection ends: a server that watches the control connection during a
  // transfer (ftpd, vsftpd with async_abor_enable) then knows that an upload's end is an abort, not
  // its completion. No Telnet IP/Synch before it: urgent data does not exist on a SAN stream, and
  // those servers read a plain ABOR. Servers that do not watch learn it from the data connection,
  // which on TCP is reset rather than closed (an upload must not look complete there either).
  const Status sent = SendLine("ABOR");
  if (!data.Accelerated()) data.ResetOnClose();
  data.Close();
  if (!sent.ok()) {
    Close();
    return interrupted;
  }
  // RFC 959: first the transfer's reply (426; 226 if it had finished), then ABOR's (226; 225 from
  // a server that had no transfer left to abort). If either does not come, the dialogue is out
  // of step: the control connection is closed.
  // options.interrupted still says true (it was what stopped the transfer): these waits end on
  // the timeout only.
  Result<Reply> transfer = ReadReply(Wakeable::kNo);
  if (!transfer.ok()) {
    Close();
    return interrupted;
  }
  aborted_transfer_reply_ = transfer.value();
  if (connected() && !ReadReply(Wakeable::kNo).ok()) Close();
  return interrupted;
}

void FtpClient::AbandonTransfer(Socket data) {
  // The server may be about to start the transfer: ABOR (not waited for) stops a server that
  // watches the control connection, and the data connection goes the way AbortTransfer's does.
  // The command's final reply and ABOR's are owed; a 1xx before them counts for nothing.
  (void)SendLine("ABOR");  // a failure closed the control connection: nothing is owed then
  if (data.valid() && !data.Accelerated()) data.ResetOnClose();
  data.Close();
}

Status FtpClient::Wait(const Socket& s, short events) const {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.timeout_ms);
  int wake = options_.interrupt_fd;
  while (true) {
    // Before the poll too: a signal may have come before this wait began, when nothing was
    // blocked for it to interrupt.
    if (Interrupted()) return Status(EINTR, kInterruptedCall);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return Status(ETIMEDOUT, events & POLLOUT ? "send" : "recv");
    pollfd p[2] = {{s.fd(), events, 0}, {wake, POLLIN, 0}};
    const int n = san_poll(p, wake >= 0 ? 2 : 1, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) return Status::FromErrno("poll");
    if (n > 0 && p[0].revents) return Status::Ok();
    // Readable, yet not interrupted: a wake-up whose interrupt was handled already (the owner
    // clears the flag before the pipe). It would wake every poll: not looked at again here.
    if (n > 0 && p[1].revents && !Interrupted()) wake = -1;
  }
}

Result<TransferStats> FtpClient::Retrieve(const std::string& remote, int fd, uint64_t offset) {
  if (offset > 0) {
    Result<Reply> r = Command("REST " + std::to_string(offset));
    if (!r.ok()) return r.status();
    if (r->code != 350) return Status(EPROTO, "REST refused");
  }
  const auto start = std::chrono::steady_clock::now();
  Result<Socket> data = StartTransfer("RETR " + remote);
  if (!data.ok()) return data.status();
  TransferStats stats;
  const Status st =
      binary_ ? ReceiveBinary(*data, fd, &stats) : ReceiveBuffered(*data, fd, true, &stats);
  return FinishTransfer(std::move(data.value()), stats, st, start);
}

Status FtpClient::ReceiveBinary(const Socket& data, int fd, TransferStats* stats) {
  // One copy: sanlib writes the file straight from the channel's receive buffers (over TCP it
  // is recv + write inside sanlib, which is what a buffer of ours would do). Blocking, bounded by
  // SO_RCVTIMEO like RecvWaiting; a signal (Ctrl-C) ends the wait with EINTR.
  Status st = data.SetReceiveTimeout(options_.timeout_ms);
  while (st.ok()) {
    if (Interrupted()) return Status(EINTR, kInterruptedCall);
    Result<size_t> got = data.RecvToFile(fd, kFileChunk);
    if (!got.ok()) {
      if (got.status().code() == EINTR) continue;
      return got.status().would_block() ? Status(ETIMEDOUT, "recv") : got.status();
    }
    if (*got == 0) break;
    stats->bytes += *got;
    if (options_.progress) options_.progress(stats->bytes);
  }
  return st;
}

Status FtpClient::ReceiveBuffered(const Socket& data, int fd, bool ascii, TransferStats* stats) {
  auto buf = std::make_unique<char[]>(kChunk);
  AsciiDecoder decoder;
  std::string converted;
  // A blocking receive (see Socket::RecvWaiting): lets a sanlib server write straight into buf.
  Status st = data.SetReceiveTimeout(options_.timeout_ms);
  while (st.ok()) {
    if (Interrupted()) return Status(EINTR, kInterruptedCall);
    Result<size_t> got = data.RecvWaiting(buf.get(), kChunk);
    if (!got.ok()) {
      if (got.status().code() == EINTR) continue;
      return got.status();
    }
    const char* out = buf.get();
    size_t out_len = *got;
    if (ascii) {
      converted.clear();
      if (*got == 0) {
        decoder.Finish(&converted);  // a lone CR at the very end is data
      } else {
        decoder.Decode(buf.get(), *got, &converted);
      }
      out = converted.data();
      out_len = converted.size();
    }
    st = WriteLocal(fd, out, out_len);
    if (*got == 0) break;
    stats->bytes += *got;
    if (options_.progress) options_.progress(stats->bytes);
  }
  return st;
}

Result<TransferStats> FtpClient::Store(const std::string& remote, int fd, bool append,
                                       uint64_t offset) {
  if (offset > 0) {
    Result<Reply> r = Command("REST " + std::to_string(offset));
    if (!r.ok()) return r.status();
    if (r->code != 350) return Status(EPROTO, "REST refused");
  }
  const auto start = std::chrono::steady_clock::now();
  Result<Socket> data = StartTransfer((append ? "APPE " : "STOR ") + remote);
  if (!data.ok()) return data.status();
  TransferStats stats;
  const Status st = binary_ ? SendBinary(*data, fd, &stats) : SendAscii(*data, fd, &stats);
  return FinishTransfer(std::move(data.value()), stats, st, start);
}

Status FtpClient::SendBinary(const Socket& data, int fd, TransferStats* stats) {
  // san_sendfile from the file's position (a resumed upload was seeked by the caller): the
  // kernel's sendfile on TCP, one copy from the file into the channel on SAN. Nonblocking, so a
  // stalled server is waited for in Wait (timeout, Ctrl-C).
  off_t pos = lseek(fd, 0, SEEK_CUR);
  if (pos < 0) return Status(errno, kLocalFileCall);
  const Status st = data.SetNonBlocking(true);
  if (!st.ok()) return st;
  while (true) {
    if (Interrupted()) return Status(EINTR, kInterruptedCall);
    Result<size_t> sent = data.SendFile(fd, &pos, kFileChunk);
    if (sent.ok()) {
      if (*sent == 0) return Status::Ok();  // the file's end (as it is now, if it changed)
      stats->bytes += *sent;
      if (options_.progress) options_.progress(stats->bytes);
      continue;
    }
    if (sent.status().code() == EINTR) continue;
    if (!sent.status().would_block()) return sent.status();  // the file's: kLocalFileCall
    const Status waited = Wait(data, POLLOUT);
    if (!waited.ok()) return waited;
  }
}

Status FtpClient::SendAscii(const Socket& data, int fd, TransferStats* stats) {
  auto buf = std::make_unique<char[]>(kChunk);  // every byte is looked at anyway: read
  std::string converted;
  while (true) {
    if (Interrupted()) return Status(EINTR, kInterruptedCall);
    const ssize_t got = ::read(fd, buf.get(), kChunk);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status(errno, kLocalFileCall);
    }
    if (got == 0) return Status::Ok();
    converted.clear();
    AsciiEncode(buf.get(), static_cast<size_t>(got), &converted);
    size_t off = 0;
    while (off < converted.size()) {
      Result<size_t> sent = data.SendSome(converted.data() + off, converted.size() - off);
      if (!sent.ok()) return sent.status();
      off += *sent;
      if (*sent > 0) continue;
      const Status waited = Wait(data, POLLOUT);
      if (!waited.ok()) return waited;
    }
    stats->bytes += converted.size();
    if (options_.progress) options_.progress(stats->bytes);
  }
}

Result<TransferStats> FtpClient::List(const std::string& verb, const std::string& path,
                                      std::string* out) {
  const auto start = std::chrono::steady_clock::now();
  Result<Socket> data = StartTransfer(path.empty() ? verb : verb + " " + path);
  if (!data.ok()) return data.status();
  TransferStats stats;
  char buf[16384];
  Status st;
  while (true) {
    if (Interrupted()) {
      st = Status(EINTR, kInterruptedCall);
      break;
    }
    Result<size_t> got = data->RecvSome(buf, sizeof buf);
    if (!got.ok()) {
      if (got.status().would_block() && (st = Wait(*data, POLLIN)).ok()) continue;
      if (st.ok()) st = Status(EIO, "recv");
      break;
    }
    if (*got == 0) break;
    out->append(buf, *got);
    stats.bytes += *got;
  }
  return FinishTransfer(std::move(data.value()), stats, st, start);
}

}  // namespace san::ftp
