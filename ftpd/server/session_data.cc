// Session: data connections (PORT EPRT PASV EPSV) and transfers (RETR STOR STOU APPE, listings).
//
// With as few copies as each side allows: a binary download is sent with san_sendfile (on kernel
// TCP, a client that is not sanlib, the kernel's sendfile(2), as other FTP servers do; on the SAN
// path sanlib reads the file into the channel); a binary upload goes from the channel's receive
// buffers into the file with san_recvfile. TYPE A converts every byte, so it goes through a
// buffer both ways. Uploads of STOR go to a temporary
// name beside the target and are renamed into place only when complete, so an interrupted upload
// never looks complete; APPE and REST+STOR extend the file in place and an interruption is logged
// as incomplete ('i') in the xferlog.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>

#include "files/virtual_path.h"
#include "files/write_all.h"
#include "ftp/protocol/ascii.h"
#include "ftp/protocol/reply.h"
#include "ftpd/server/session.h"

namespace san::ftp {
namespace {

constexpr size_t kChunk = 256 * 1024;
// One san_recvfile / san_sendfile asks for this much (no buffer of ours is involved; on a
// nonblocking socket either moves what fits and returns).
constexpr size_t kFileChunk = 1024 * 1024;
// While the data connection never blocks, the control connection is still looked at (for ABOR,
// STAT, a vanished client) after every this many bytes.
constexpr size_t kControlCheckBytes = 4 * 1024 * 1024;

// The address without an IPv4-mapped prefix, so "::ffff:1.2.3.4" and "1.2.3.4" compare equal.
std::string PlainHost(const HostPort& hp) {
  std::string h = hp.host();
  if (h.rfind("::ffff:", 0) == 0 && h.find('.') != std::string::npos) h = h.substr(7);
  return h;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void Session::ResetData() {
  pasv_listener_.Close();
  data_mode_ = DataMode::kNone;
}

void Session::DoPort(const Command& cmd, bool extended) {
  if (epsv_all_) {
    Reply(501, "EPSV ALL in effect: PORT and EPRT refused.");
    return;
  }
  std::optional<HostPort> hp = extended ? ParseEprtArg(cmd.arg) : ParsePortArg(cmd.arg);
  if (!hp) {
    Reply(extended ? 522 : 501,
          extended ? "Bad EPRT argument; supported protocols (1,2)." : "Bad PORT argument.");
    return;
  }
  // Bounce protection (RFC 2577): the data connection may only go back to the client itself, and
  // never to a privileged port.
  if (PlainHost(*hp) != PlainHost(peer_)) {
    Reply(504, "Illegal PORT: address differs from the control connection's.");
    return;
  }
  if (hp->port() < 1024) {
    Reply(504, "Illegal PORT: privileged port refused.");
    return;
  }
  ResetData();
  active_addr_ = *hp;
  data_mode_ = DataMode::kActive;
  Reply(200, extended ? "EPRT command successful." : "PORT command successful.");
}

void Session::DoPasv(bool extended, const Command& cmd) {
  if (extended && cmd.has_arg) {
    std::string a = cmd.arg;
    for (char& c : a) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
    if (a == "ALL") {
      epsv_all_ = true;
      Reply(200, "EPSV ALL ok.");
      return;
    }
    const int want = a == "1" ? AF_INET : a == "2" ? AF_INET6 : -1;
    const bool mapped = local_.family() == AF_INET6 && PlainHost(local_) != local_.host();
    const int have = mapped ? AF_INET : local_.family();
    if (want != have) {
      Reply(522, have == AF_INET ? "Network protocol not supported, use (1)"
                                 : "Network protocol not supported, use (2)");
      return;
    }
  }
  if (!extended && epsv_all_) {
    Reply(501, "EPSV ALL in effect: PASV refused.");
    return;
  }
  if (!extended && local_.family() == AF_INET6 && PlainHost(local_) == local_.host()) {
    Reply(425, "PASV needs IPv4; use EPSV.");
    return;
  }
  ResetData();
  HostPort bind_addr = local_;
  if (bind_addr.family() == AF_INET) {
    reinterpret_cast<sockaddr_in*>(&bind_addr.addr)->sin_port = 0;
  } else {
    reinterpret_cast<sockaddr_in6*>(&bind_addr.addr)->sin6_port = 0;
  }
  Result<Socket> listener = Socket::Listen(bind_addr, 1);
  if (!listener.ok()) {
    Reply(425, "Cannot open passive connection: " + listener.status().ToString());
    return;
  }
  pasv_listener_ = std::move(listener.value());
  data_mode_ = DataMode::kPassive;
  const HostPort where = pasv_listener_.LocalAddress();
  if (extended) {
    Reply(229, "Entering Extended Passive Mode (|||" + std::to_string(where.port()) + "|)");
    return;
  }
  HostPort v4;
  if (where.family() == AF_INET) {
    v4 = where;
  } else {  // IPv4-mapped: present the IPv4 address
    sockaddr_in sin{};
    sin.sin_family = AF_INET;
    sin.sin_port = reinterpret_cast<const sockaddr_in6*>(&where.addr)->sin6_port;
    memcpy(&sin.sin_addr,
           &reinterpret_cast<const sockaddr_in6*>(&where.addr)->sin6_addr.s6_addr[12], 4);
    v4 = MakeHostPort(reinterpret_cast<sockaddr*>(&sin), sizeof sin);
  }
  Reply(227, "Entering Passive Mode (" + FormatPortArg(v4) + ").");
}

Result<Socket> Session::OpenData() {
  const int timeout_ms = config_.data_timeout_s * 1000;
  if (data_mode_ == DataMode::kNone) {
    Reply(425, "Use PORT, EPRT, PASV or EPSV first.");
    return Status(ENOTCONN, "no data connection");
  }
  if (data_mode_ == DataMode::kActive) {
    HostPort from = local_;
    if (from.family() == AF_INET) {
      reinterpret_cast<sockaddr_in*>(&from.addr)->sin_port = 0;
    } else {
      reinterpret_cast<sockaddr_in6*>(&from.addr)->sin6_port = 0;
    }
    HostPort to = active_addr_;
    if (from.family() == AF_INET6 && to.family() == AF_INET) {
      // An IPv4 PORT on a dual-stack control connection: connect from plain IPv4.
      from = MakeHostPort(reinterpret_cast<const sockaddr*>(&to.addr), to.len);
      auto* sin = reinterpret_cast<sockaddr_in*>(&from.addr);
      sin->sin_port = 0;
      inet_pton(AF_INET, PlainHost(local_).c_str(), &sin->sin_addr);
    }
    Result<Socket> s = Socket::Connect(to, timeout_ms, &from);
    ResetData();
    if (!s.ok()) {
      Reply(425, "Can't open data connection: " + s.status().ToString());
      return s.status();
    }
    return s;
  }
  // Passive: only the client of this session may connect (no data connection theft).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    HostPort peer;
    Result<Socket> s = pasv_listener_.Accept(static_cast<int>(left.count()), &peer);
    if (!s.ok()) {
      if (s.status().would_block()) break;
      continue;
    }
    if (PlainHost(peer) != PlainHost(peer_)) continue;  // a stranger: drop it, keep waiting
    ResetData();
    return s;
  }
  ResetData();
  Reply(425, "Can't open data connection: nobody connected.");
  return Status(ETIMEDOUT, "accept(data)");
}

bool Session::ControlInterrupted() {
  if (!control_.Readable(0)) return false;
  std::string line;
  while (true) {
    const LineReader::Outcome got = reader_.Next(0, &line);
    if (got == LineReader::Outcome::kTimeout) return false;  // a partial line so far
    if (got == LineReader::Outcome::kTooLong) continue;
    if (got != LineReader::Outcome::kLine) {
      quit_ = true;  // the client is gone: stop the transfer and the session
      return true;
    }
    const ParseOutcome p = ParseCommand(line);
    if (p.ok && p.command.verb == "ABOR") return true;
    if (p.ok && p.command.verb == "STAT" && !p.command.has_arg) {
      Reply(213, "Status: " + std::to_string(transfer_bytes_) + " bytes transferred so far.");
    } else {
      pending_.push_back(line);  // answered after the transfer, in order
    }
    if (!control_.Readable(0) && reader_.buffered() == 0) return false;
  }
}

Session::TransferEnd Session::WaitForData(const Socket& data, short events, int timeout_ms) {
  bool data_ready = false, control_ready = false;
  const int n = WaitEither(data, events, control_, timeout_ms, &data_ready, &control_ready);
  if (n == 0) return TransferEnd::kTimeout;
  if (n < 0) return TransferEnd::kDataError;
  if (control_ready && ControlInterrupted()) return TransferEnd::kAborted;
  return TransferEnd::kOk;
}

Session::TransferEnd Session::SendFileBytes(int file_fd, uint64_t offset, const Socket& data,
                                            uint64_t* bytes) {
  const int timeout_ms = config_.data_timeout_s * 1000;
  // Nonblocking, so a slow peer is waited for here, in san_poll on data and control together
  // (ABOR, STAT, the data timeout), never inside san_sendfile.
  TransferEnd end = data.SetNonBlocking(true).ok() ? TransferEnd::kOk : TransferEnd::kDataError;
  off_t pos = static_cast<off_t>(offset);
  size_t since_check = 0;
  in_transfer_ = true;
  transfer_bytes_ = 0;
  while (end == TransferEnd::kOk) {
    Result<size_t> sent = data.SendFile(file_fd, &pos, kFileChunk);
    if (!sent.ok()) {
      if (sent.status().would_block()) {
        end = WaitForData(data, POLLOUT, timeout_ms);
      } else if (sent.status().code() != EINTR) {
        // errno tells the file's failures (EIO, EINVAL, ...) from the connection's (EPIPE,
        // ECONNRESET, ...): Socket::SendFile sorts them (IsConnectionErrno).
        end = strcmp(sent.status().call(), kLocalFileCall) == 0 ? TransferEnd::kFileError
                                                                : TransferEnd::kDataError;
      }
      continue;
    }
    // 0: the file ends here -- its end when the transfer began, or an earlier one if it was cut
    // meanwhile (the reader gets fewer bytes than the 150 announced; the 226 and the xferlog
    // count what was sent). A file that grew is sent to its new end.
    if (*sent == 0) break;
    *bytes += *sent;
    transfer_bytes_ = *bytes;
    // A peer that is never slow is still checked for ABOR now and then.
    since_check += *sent;
    if (since_check >= kControlCheckBytes) {
      since_check = 0;
      if (control_.Readable(0) && ControlInterrupted()) end = TransferEnd::kAborted;
    }
  }
  in_transfer_ = false;
  return end;
}

Session::TransferEnd Session::SendFrom(int file_fd, const std::string* memory, const Socket& data,
                                       uint64_t* bytes) {
  const int timeout_ms = config_.data_timeout_s * 1000;
  std::unique_ptr<char[]> buf;
  if (!memory) buf = std::make_unique<char[]>(kChunk);
  std::string converted;
  size_t mem_pos = 0;
  size_t since_check = 0;
  in_transfer_ = true;
  transfer_bytes_ = 0;
  TransferEnd end = TransferEnd::kOk;
  while (end == TransferEnd::kOk) {
    const char* out = nullptr;
    size_t n = 0;        // bytes of the file (or listing)
    size_t out_len = 0;  // bytes on the wire for them (TYPE A adds CRs)
    if (memory) {
      n = out_len = std::min(kChunk, memory->size() - mem_pos);
      out = memory->data() + mem_pos;
      mem_pos += n;
    } else {
      const ssize_t r = ::read(file_fd, buf.get(), kChunk);
      if (r < 0) {
        if (errno != EINTR) end = TransferEnd::kFileError;
        continue;
      }
      n = static_cast<size_t>(r);
      converted.clear();
      AsciiEncode(buf.get(), n, &converted);  // TYPE A: LF -> CRLF on the wire
      out = converted.data();
      out_len = converted.size();
    }
    if (n == 0) break;
    // Send the chunk; wait (watching the control connection for ABOR) only when the peer is slow.
    size_t off = 0;
    while (off < out_len && end == TransferEnd::kOk) {
      Result<size_t> sent = data.SendSome(out + off, out_len - off);
      if (!sent.ok()) {
        end = TransferEnd::kDataError;
      } else if (*sent > 0) {
        off += *sent;
      } else {
        end = WaitForData(data, POLLOUT, timeout_ms);
      }
    }
    since_check += out_len;
    if (end == TransferEnd::kOk && since_check >= kControlCheckBytes) {
      since_check = 0;
      if (control_.Readable(0) && ControlInterrupted()) end = TransferEnd::kAborted;
    }
    if (end != TransferEnd::kOk) break;
    *bytes += n;
    transfer_bytes_ = *bytes;
  }
  in_transfer_ = false;
  return end;
}

Session::TransferEnd Session::ReceiveInto(int file_fd, const Socket& data, uint64_t* bytes) {
  const int timeout_ms = config_.data_timeout_s * 1000;
  // Binary uploads go from the SAN channel's receive buffers to the file in one copy
  // (san_recvfile; on a TCP data connection sanlib does recv + write). TYPE A converts every byte,
  // so it receives into a buffer.
  const bool to_file = binary_ && data.SetNonBlocking(true).ok();
  std::unique_ptr<char[]> buf;
  if (!to_file) buf = std::make_unique<char[]>(kChunk);
  std::string converted;
  AsciiDecoder ascii;  // TYPE A: holds a CR that ends a chunk until the next byte decides
  size_t since_check = 0;
  in_transfer_ = true;
  transfer_bytes_ = 0;
  TransferEnd end = TransferEnd::kOk;
  while (true) {
    Result<size_t> got =
        to_file ? data.RecvToFile(file_fd, kFileChunk) : data.RecvSome(buf.get(), kChunk);
    if (!got.ok()) {
      if (got.status().code() == EINTR) continue;
      if (!got.status().would_block()) {
        end = strcmp(got.status().call(), kLocalFileCall) == 0 ? TransferEnd::kFileError
                                                               : TransferEnd::kDataError;
        break;
      }
      end = WaitForData(data, POLLIN, timeout_ms);
      if (end != TransferEnd::kOk) break;
      continue;
    }
    const size_t n = *got;
    if (n == 0) {
      // EOF ends a stream-mode upload; but if the control connection is gone too, the client
      // died mid-upload rather than finished it, and an ABOR already sent (a client that sends
      // ABOR and then closes the data connection, as ftp_client on Ctrl-C) means it gave up.
      if (ControlInterrupted()) end = quit_ ? TransferEnd::kDataError : TransferEnd::kAborted;
      break;
    }
    if (!to_file) {
      const char* in = buf.get();
      size_t in_len = n;
      if (!binary_) {  // CRLF -> LF
        converted.clear();
        ascii.Decode(buf.get(), n, &converted);
        in = converted.data();
        in_len = converted.size();
      }
      if (!files::WriteAll(file_fd, in, in_len)) {
        end = TransferEnd::kFileError;
        break;
      }
    }
    *bytes += n;
    transfer_bytes_ = *bytes;
    since_check += n;
    if (since_check >= kControlCheckBytes) {
      since_check = 0;
      if (control_.Readable(0) && ControlInterrupted()) {
        end = TransferEnd::kAborted;
        break;
      }
    }
  }
  if (!binary_ && end == TransferEnd::kOk) {
    converted.clear();
    ascii.Finish(&converted);
    if (!files::WriteAll(file_fd, converted.data(), converted.size()))
      end = TransferEnd::kFileError;
  }
  in_transfer_ = false;
  return end;
}

void Session::FinishTransfer(TransferEnd end, Socket& data, uint64_t bytes, double seconds) {
  const std::string mode = data.Mode();
  data.Close();  // before the reply: a client may wait for EOF on data before reading 226
  char secs[32];
  snprintf(secs, sizeof secs, "%.3f", seconds);
  switch (end) {
    case TransferEnd::kOk:
      Reply(226, "Transfer complete: " + std::to_string(bytes) + " bytes in " + secs +
                     " s, data path " + mode + ".");
      break;
    case TransferEnd::kAborted:
      Reply(426, "Transfer aborted.");
      Reply(226, "ABOR successful.");
      break;
    case TransferEnd::kDataError:
      Reply(426, "Connection closed; transfer aborted.");
      break;
    case TransferEnd::kTimeout:
      Reply(426, "Data connection timed out; transfer aborted.");
      break;
    case TransferEnd::kFileError:
      Reply(451, "Local error in processing; transfer aborted.");
      break;
  }
}

void Session::LogTransfer(const std::string& vpath, uint64_t bytes, double seconds, bool incoming,
                          bool complete) {
  if (!log_) return;
  TransferRecord r;
  r.seconds = seconds;
  r.remote_host = PlainHost(peer_);
  r.bytes = bytes;
  r.path = vpath;
  r.binary = binary_;
  r.incoming = incoming;
  r.anonymous = anonymous_;
  r.user = user_;
  r.complete = complete;
  log_->Record(r);
}

void Session::DoRetr(const Command& cmd) {
  const uint64_t offset = rest_.value_or(0);
  rest_.reset();
  std::optional<std::string> p = Resolve(cmd.arg);
  if (!p) return;
  Result<UniqueFd> file = jail_->OpenFile(*p, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (!file.ok()) {
    ResetData();
    ReplyFsError(file.status(), "RETR");
    return;
  }
  struct stat st {};
  fstat(file->get(), &st);
  if (!S_ISREG(st.st_mode)) {
    ResetData();
    Reply(550, "RETR: not a regular file.");
    return;
  }
  fcntl(file->get(), F_SETFL, 0);  // O_NONBLOCK was only for opening (a FIFO must not hang us)
  if (offset > static_cast<uint64_t>(st.st_size)) {
    ResetData();
    Reply(554, "REST offset beyond the end of the file.");
    return;
  }
  if (offset > 0 && lseek(file->get(), static_cast<off_t>(offset), SEEK_SET) < 0) {
    ResetData();
    Reply(554, "Cannot seek to the REST offset.");
    return;
  }
  Result<Socket> data = OpenData();
  if (!data.ok()) return;
  Reply(150, std::string("Opening ") + (binary_ ? "BINARY" : "ASCII") +
                 " mode data connection for " + files::BaseName(*p) + " (" +
                 std::to_string(st.st_size - static_cast<off_t>(offset)) + " bytes).");
  const auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  // Binary: san_sendfile from the REST offset (the kernel's sendfile on TCP, one copy into the
  // channel on SAN). TYPE A converts every byte, so it reads from the file position (lseek above).
  const TransferEnd end = binary_ ? SendFileBytes(file->get(), offset, data.value(), &bytes)
                                  : SendFrom(file->get(), nullptr, data.value(), &bytes);
  const double secs = SecondsSince(start);
  // Logged before the final reply: a client that has its 226 finds the xferlog line there.
  LogTransfer(*p, bytes, secs, false, end == TransferEnd::kOk);
  FinishTransfer(end, data.value(), bytes, secs);
}

void Session::DoStore(const Command& cmd, char kind) {
  const uint64_t offset = rest_.value_or(0);
  rest_.reset();
  if (!RequireWrite()) {
    ResetData();
    return;
  }
  std::string target_arg = cmd.arg;
  if (kind == 'U' && !cmd.has_arg) target_arg = "ftpd-upload";
  std::optional<std::string> p = Resolve(target_arg);
  if (!p) return;
  std::string name;
  Result<UniqueFd> dir = jail_->OpenParent(*p, &name);
  if (!dir.ok()) {
    ResetData();
    ReplyFsError(dir.status(), "STOR");
    return;
  }
  struct stat st {};
  const bool exists = fstatat(dir->get(), name.c_str(), &st, 0) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    ResetData();
    Reply(550, "STOR: Is a directory.");
    return;
  }
  // Where the bytes go: tmp_name (renamed to name on success) or name itself.
  std::string write_name = name;
  std::string temp_name;
  int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY;
  if (kind == 'U') {
    // The first free "name", "name.1", "name.2", ...; O_EXCL settles a race with another session.
    for (int i = 1; exists && i <= 1000; ++i) {
      write_name = name + "." + std::to_string(i);
      struct stat other {};
      if (fstatat(dir->get(), write_name.c_str(), &other, AT_SYMLINK_NOFOLLOW) != 0) break;
    }
    flags |= O_EXCL;
  } else if (kind == 'A') {
    flags |= O_APPEND;
  } else if (offset > 0) {
    if (!exists || static_cast<uint64_t>(st.st_size) < offset) {
      ResetData();
      Reply(554, "REST offset beyond the end of the file.");
      return;
    }
  } else {
    temp_name = "." + name + ".part-" + std::to_string(getpid());
    write_name = temp_name;
    flags |= O_EXCL | O_TRUNC;
  }
  const int fd = openat(dir->get(), write_name.c_str(), flags, 0644);
  if (fd < 0) {
    ResetData();
    ReplyFsError(Status::FromErrno("open"), "STOR");
    return;
  }
  UniqueFd file(fd);
  if (offset > 0 && lseek(fd, static_cast<off_t>(offset), SEEK_SET) < 0) {
    ResetData();
    Reply(554, "Cannot seek to the REST offset.");
    return;
  }
  Result<Socket> data = OpenData();
  if (!data.ok()) {
    if (!temp_name.empty() || kind == 'U') unlinkat(dir->get(), write_name.c_str(), 0);
    return;
  }
  if (kind == 'U') {
    Reply(150, "FILE: " + write_name);
  } else {
    Reply(150, "Ok to send data.");
  }
  const auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  TransferEnd end = ReceiveInto(fd, data.value(), &bytes);
  if (end == TransferEnd::kOk && offset > 0 && kind == 'S') {
    // A resumed upload replaces the tail: cut whatever an older, longer file had beyond it.
    const off_t now = lseek(fd, 0, SEEK_CUR);
    if (now < 0 || ftruncate(fd, now) != 0) end = TransferEnd::kFileError;
  }
  file.reset();
  const std::string final_vpath =
      kind == 'U' ? files::DirName(*p) + (files::DirName(*p) == "/" ? "" : "/") + write_name : *p;
  if (!temp_name.empty()) {
    if (end == TransferEnd::kOk) {
      if (renameat(dir->get(), temp_name.c_str(), dir->get(), name.c_str()) != 0) {
        end = TransferEnd::kFileError;
      }
    }
    if (end != TransferEnd::kOk) unlinkat(dir->get(), temp_name.c_str(), 0);
  }
  const double secs = SecondsSince(start);
  LogTransfer(final_vpath, bytes, secs, true, end == TransferEnd::kOk);
  FinishTransfer(end, data.value(), bytes, secs);
}

}  // namespace san::ftp
