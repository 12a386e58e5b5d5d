#include "client.h"

#include <netdb.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "net/file_source.h"
#include "protocol/ascii.h"

namespace san::ftp {
namespace {

constexpr size_t kChunk = 256 * 1024;
// One san_recvfile asks for this much: the bytes go from the channel to the file without a
// buffer of ours, so the size only bounds how often progress is reported.
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
Status WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status(errno, kLocalFileCall);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
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
  Result<Reply> greeting = ReadReply();
  if (!greeting.ok()) return greeting.status();
  greeting_ = greeting.value();
  if (greeting->code != 220) return Status(ECONNREFUSED, "server refused the session");
  if (options_.san_upgrade && !control_.Accelerated()) {
    Result<Reply> feat = Command("FEAT");
    if (feat.ok() && feat->code == 211 && feat->text.find("AUTH SAN") != std::string::npos) {
      // The server starts the upgrade right behind its 234: read exactly the reply.
      const Status sent = SendLine("AUTH SAN");
      Result<Reply> auth = sent.ok() ? ReadReply(true) : Result<Reply>(sent);
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
}

Status FtpClient::SendLine(const std::string& line) {
  if (options_.verbose) {
    fprintf(stderr, "---> %s\n", line.rfind("PASS ", 0) == 0 ? "PASS XXXX" : line.c_str());
  }
  std::string wire = line;
  wire.append("\r\n");
  return control_.SendAll(wire, options_.timeout_ms);
}

Result<Reply> FtpClient::ReadReply(bool exact) {
  if (!reader_) return Status(ENOTCONN, "not connected");
  ReplyAssembler assembler;
  std::string line;
  while (true) {
    const LineReader::Outcome got = reader_->Next(options_.timeout_ms, &line, exact);
    if (got == LineReader::Outcome::kTimeout) return Status(ETIMEDOUT, "reply");
    if (got != LineReader::Outcome::kLine) {
      Close();
      return Status(ECONNRESET, "control connection closed");
    }
    if (options_.verbose) fprintf(stderr, "%s\n", line.c_str());
    const ReplyAssembler::Result r = assembler.Feed(line);
    if (r == ReplyAssembler::Result::kBad) return Status(EPROTO, "malformed reply");
    if (r == ReplyAssembler::Result::kDone) {
      last_ = assembler.reply();
      if (last_.code == 421) Close();  // the server is closing the control connection
      return last_;
    }
  }
}

Result<Reply> FtpClient::Command(const std::string& line) {
  if (!control_.valid()) return Status(ENOTCONN, "not connected");
  const Status st = SendLine(line);
  if (!st.ok()) return st;
  Result<Reply> r = ReadReply();
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
  if (!r.ok()) return r.status();
  if (!r->positive_preliminary()) return Status(EPROTO, "transfer refused");
  if (!options_.passive) {
    Result<Socket> s = listener.Accept(options_.timeout_ms);
    if (!s.ok()) return s.status();
    data = std::move(s.value());
  }
  return data;
}

Result<TransferStats> FtpClient::FinishTransfer(Socket data, TransferStats stats, Status st) {
  stats.data_path = data.Mode();
  data.Close();  // also what tells the server that a failed download ends here
  Result<Reply> r = ReadReply();
  if (!st.ok()) return st;
  if (!r.ok()) return r.status();
  if (r->code != 226 && r->code != 250) return Status(EIO, "transfer failed");
  return stats;
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
  stats.seconds = Since(start);
  return FinishTransfer(std::move(data.value()), stats, st);
}

Status FtpClient::ReceiveBinary(const Socket& data, int fd, TransferStats* stats) {
  // One copy: sanlib writes the file straight from the channel's receive buffers (over TCP it
  // is recv + write inside sanlib, which is what a buffer of ours would do). Blocking, bounded by
  // SO_RCVTIMEO like RecvWaiting.
  Status st = data.SetReceiveTimeout(options_.timeout_ms);
  while (st.ok()) {
    Result<size_t> got = data.RecvToFile(fd, kFileChunk);
    if (!got.ok()) return got.status().would_block() ? Status(ETIMEDOUT, "recv") : got.status();
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
    Result<size_t> got = data.RecvWaiting(buf.get(), kChunk);
    if (!got.ok()) return got.status();
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
    st = WriteAll(fd, out, out_len);
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
  stats.seconds = Since(start);
  return FinishTransfer(std::move(data.value()), stats, st);
}

Status FtpClient::SendBinary(const Socket& data, int fd, TransferStats* stats) {
  // From a leased mapping of the file where possible (san_send copies from the page cache);
  // over kernel TCP the kernel copies anyway, and a buffer is as good.
  FileSource source(fd, data.Accelerated(), kChunk);
  int waited_ms = 0;  // for a stalled server, in slices while on the mapping (FileSource)
  while (true) {
    Result<FileSource::Chunk> chunk = source.Next();
    if (!chunk.ok()) return Status(chunk.status().code(), kLocalFileCall);
    if (chunk->size == 0) return Status::Ok();
    const char* p = chunk->data;
    size_t left = chunk->size;
    while (left > 0) {
      p = source.Pin(p, left);  // mapped memory is ours only while the file's lease holds
      Result<size_t> sent = data.SendSome(p, left);
      if (!sent.ok()) return sent.status();
      if (*sent > 0) {
        p += *sent;
        left -= *sent;
        waited_ms = 0;
        stats->bytes += *sent;
        continue;
      }
      const int slice = source.mapped() ? std::min(options_.timeout_ms, FileSource::kLeaseCheckMs)
                                        : options_.timeout_ms;
      if (!data.Writable(slice) && (waited_ms += slice) >= options_.timeout_ms) {
        return Status(ETIMEDOUT, "send");
      }
    }
    if (options_.progress) options_.progress(stats->bytes);
  }
}

Status FtpClient::SendAscii(const Socket& data, int fd, TransferStats* stats) {
  FileSource source(fd, false, kChunk);  // every byte is looked at anyway: read, not mapped
  std::string converted;
  while (true) {
    Result<FileSource::Chunk> chunk = source.Next();
    if (!chunk.ok()) return Status(chunk.status().code(), kLocalFileCall);
    if (chunk->size == 0) return Status::Ok();
    converted.clear();
    AsciiEncode(chunk->data, chunk->size, &converted);
    const Status st = data.SendAll(converted, options_.timeout_ms);
    if (!st.ok()) return st;
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
  bool ok = true;
  while (true) {
    Result<size_t> got = data->Recv(buf, sizeof buf, options_.timeout_ms);
    if (!got.ok()) {
      ok = false;
      break;
    }
    if (*got == 0) break;
    out->append(buf, *got);
    stats.bytes += *got;
  }
  stats.seconds = Since(start);
  return FinishTransfer(std::move(data.value()), stats, ok ? Status::Ok() : Status(EIO, "recv"));
}

}  // namespace san::ftp
