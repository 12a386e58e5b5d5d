#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "ftp_client/interrupt.h"
#include "ftp_client/modes.h"
#include "ftp_client/report.h"
#include "ftp_client/url.h"
#include "sanlib/common/unique_fd.h"

namespace san::ftp {
namespace {

// 4xx/5xx from the server -> kExitRemote; anything else (connection, timeout) -> kExitTransfer.
int TransferFailure(const FtpClient& client, const Status& st, const char* what) {
  if (strcmp(st.call(), kInterruptedCall) == 0) {
    // Ctrl-C: the transfer was aborted (ABOR) and the server's two replies read, if they came.
    const Reply& t = client.aborted_transfer_reply();
    const Reply& r = client.last_reply();
    fprintf(stderr, "ftp_client: %s interrupted: %s after %llu bytes over %s", what,
            t.code ? "aborted" : "aborted, no reply from the server",
            static_cast<unsigned long long>(client.last_stats().bytes),
            client.last_stats().data_path.c_str());
    if (t.code) fprintf(stderr, " (server: %d %s", t.code, t.text.c_str());
    if (t.code && client.connected()) fprintf(stderr, "; %d %s", r.code, r.text.c_str());
    fprintf(stderr, "%s\n", t.code ? ")" : "");
    return kExitInterrupted;
  }
  if (strcmp(st.call(), kReplyInterruptedCall) == 0) {
    // Ctrl-C before the transfer began (waiting for EPSV's or the 150) or after its data (the
    // 226): nothing more is said to the server; exiting closes the connection.
    fprintf(stderr, "ftp_client: %s interrupted waiting for the server's reply after %llu bytes\n",
            what, static_cast<unsigned long long>(client.last_stats().bytes));
    return kExitInterrupted;
  }
  if (strcmp(st.call(), kLocalFileCall) == 0) {
    fprintf(stderr, "ftp_client: %s failed: local file: %s\n", what, strerror(st.code()));
    return kExitLocal;
  }
  const Reply& r = client.last_reply();
  fprintf(stderr, "ftp_client: %s failed: %s (last reply: %d %s)\n", what, st.ToString().c_str(),
          r.code, r.text.c_str());
  if (!client.connected()) return kExitTransfer;
  return r.code >= 400 && r.code != 426 ? kExitRemote : kExitTransfer;
}

std::string BaseOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int RunBatch(const BatchRequest& req, const ClientOptions& options) {
  std::optional<FtpUrl> url = ParseFtpUrl(req.url);
  if (!url) {
    fprintf(stderr, "ftp_client: not an ftp:// URL: %s\n", req.url.c_str());
    return kExitUsage;
  }
  FtpClient client(options);
  Status st = client.Open(url->host, url->port);
  if (!st.ok()) {
    fprintf(stderr, "ftp_client: cannot connect to %s:%u: %s\n", url->host.c_str(), url->port,
            st.ToString().c_str());
    return kExitConnect;
  }
  const std::string user = url->user.empty() ? "anonymous" : url->user;
  const std::string pass = url->has_password ? url->password : "ftp_client@";
  st = client.Login(user, pass);
  if (!st.ok()) {
    fprintf(stderr, "ftp_client: login as %s failed: %d %s\n", user.c_str(),
            client.last_reply().code, client.last_reply().text.c_str());
    return kExitLogin;
  }
  const char* type = req.ascii ? "TYPE A" : "TYPE I";
  if (!client.SetBinary(!req.ascii).ok())
    return TransferFailure(client, Status(EPROTO, type), type);
  Result<TransferStats> stats = Status(EINVAL, "no action");
  if (req.list) {
    std::string text;
    {
      interrupt::TransferScope scope;
      stats = client.List("LIST", url->path, &text);
    }
    if (!stats.ok()) return TransferFailure(client, stats.status(), "LIST");
    fwrite(text.data(), 1, text.size(), stdout);
  } else if (!req.put.empty()) {
    UniqueFd in(::open(req.put.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in.valid()) {
      perror(("ftp_client: " + req.put).c_str());
      return kExitLocal;
    }
    std::string remote = url->path;
    if (remote.empty() || remote.back() == '/') remote += BaseOf(req.put);
    uint64_t offset = 0;
    if (req.resume) {
      Result<Reply> size = client.Command("SIZE " + remote);
      if (size.ok() && size->code == 213) offset = std::strtoull(size->text.c_str(), nullptr, 10);
      if (offset > 0 && lseek(in.get(), static_cast<off_t>(offset), SEEK_SET) < 0) {
        perror("ftp_client: seek");
        return kExitLocal;
      }
    }
    Progress progress(stderr, 0, false, true);
    client.options().progress = [&progress](uint64_t b) { progress.Update(b); };
    {
      interrupt::TransferScope scope;
      stats = client.Store(remote, in.get(), false, offset);
    }
    progress.Done();
    if (!stats.ok()) return TransferFailure(client, stats.status(), "STOR");
  } else {
    if (url->path.empty() || url->path.back() == '/') {
      fprintf(stderr, "ftp_client: the URL names no file to get (use --list for a directory)\n");
      return kExitUsage;
    }
    const std::string out_name = req.output.empty() ? BaseOf(url->path) : req.output;
    uint64_t offset = 0;
    UniqueFd out;
    if (out_name == "-") {
      out.reset(dup(STDOUT_FILENO));
    } else {
      int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (req.resume ? 0 : O_TRUNC);
      out.reset(::open(out_name.c_str(), flags, 0644));
      struct stat st_local {};
      if (out.valid() && req.resume && fstat(out.get(), &st_local) == 0) {
        offset = static_cast<uint64_t>(st_local.st_size);
        lseek(out.get(), 0, SEEK_END);
      }
    }
    if (!out.valid()) {
      perror(("ftp_client: " + out_name).c_str());
      return kExitLocal;
    }
    uint64_t total = 0;
    Result<Reply> size = client.Command("SIZE " + url->path);
    if (size.ok() && size->code == 213) total = std::strtoull(size->text.c_str(), nullptr, 10);
    if (req.resume && offset == total && total > 0) {
      fprintf(stderr, "ftp_client: %s is complete already\n", out_name.c_str());
      return kExitOk;
    }
    Progress progress(stderr, total, false, true);
    client.options().progress = [&progress, offset](uint64_t b) { progress.Update(b + offset); };
    {
      interrupt::TransferScope scope;
      stats = client.Retrieve(url->path, out.get(), offset);
    }
    progress.Done();
    if (!stats.ok()) {
      const int code = TransferFailure(client, stats.status(), "RETR");
      // What arrived stays, in order (never removed: --resume can go on from it).
      if (code == kExitInterrupted && out_name != "-") {
        fprintf(stderr, "ftp_client: the partial file stays: %s\n", out_name.c_str());
      }
      return code;
    }
  }
  fprintf(stderr, "%s\n", FormatStats(stats.value()).c_str());
  if (options.verbose) fprintf(stderr, "--- data connection: %s\n", stats->data_path.c_str());
  (void)client.Command("QUIT");
  return kExitOk;
}

}  // namespace san::ftp
