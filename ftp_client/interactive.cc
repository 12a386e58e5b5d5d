// Interactive mode: netkit-ftp's commands. On a terminal lines come from libedit (history, line
// editing); otherwise commands are read from stdin, so scripts and tests can drive it. Ctrl-C
// (interrupt.h) aborts a running transfer and comes back to the prompt; while a command waits for
// its reply it comes back at once (the reply is skipped before the next command: FtpClient); at
// the prompt it gives a new one, as netkit-ftp does.
#include <editline/readline.h>
#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ftp_client/interrupt.h"
#include "ftp_client/modes.h"
#include "ftp_client/report.h"
#include "sanlib/common/unique_fd.h"

namespace san::ftp {
namespace {

std::vector<std::string> Split(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

std::string BaseOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class Shell {
 public:
  explicit Shell(const ClientOptions& options) : options_(options), client_(options) {}

  // The next command line; false at the end of input. Ctrl-C while waiting: a new prompt.
  bool ReadLine(std::string* line) {
    fflush(stdout);  // what the last command printed, before waiting (stdout may be a pipe)
    while (true) {
      errno = 0;
      if (tty_) {
        char* l = readline("ftp> ");
        if (l) {
          *line = l;
          if (*l) add_history(l);
          free(l);
          return true;
        }
      } else {
        const ssize_t n = getline(&stdin_buf_, &stdin_cap_, stdin);
        if (n >= 0) {
          line->assign(stdin_buf_, static_cast<size_t>(n));
          if (!line->empty() && line->back() == '\n') line->pop_back();
          return true;
        }
      }
      if (!interrupt::Pending() && errno != EINTR) return false;  // end of input
      interrupt::Clear();
      clearerr(stdin);
      if (tty_) printf("\n");
      fflush(stdout);
    }
  }

  void Open(const std::string& host, uint16_t port) {
    const Status st = client_.Open(host, port);
    if (!st.ok()) {
      if (!WasInterrupted(st))
        printf("ftp: connect to %s: %s\n", host.c_str(), st.ToString().c_str());
      failed_ = true;
      return;
    }
    printf("Connected to %s.\n%d %s\n", host.c_str(), client_.greeting().code,
           client_.greeting().text.c_str());
    if (options_.verbose) printf("Control connection: %s\n", client_.control_mode().c_str());
  }

  // The server's reply to the last command, if one came.
  void Reply() {
    const auto& r = client_.last_reply();
    if (r.code == 0) return;
    printf("%d %s\n", r.code, r.text.c_str());
    if (r.code >= 400) failed_ = true;
  }

  bool Need(bool ok, const char* usage) {
    if (!ok) printf("usage: %s\n", usage);
    return ok;
  }

  bool Connected() {
    if (!client_.connected()) printf("Not connected.\n");
    return client_.connected();
  }

  // Ctrl-C stopped the wait for a reply? Then says so (the client skips that reply later).
  bool WasInterrupted(const Status& st) {
    if (strcmp(st.call(), kReplyInterruptedCall) != 0) return false;
    failed_ = true;
    if (tty_) printf("\n");  // after the ^C the terminal echoed
    if (!client_.connected()) {
      printf("Interrupted; connection closed.\n");
    } else if (client_.owed_replies() > 0) {
      printf("Interrupted; the reply still owed will be skipped.\n");
    } else {
      printf("Interrupted.\n");
    }
    return true;
  }

  // A command that got no reply: interrupted, or the connection's trouble (then maybe closed).
  void Failure(const Status& st) {
    if (WasInterrupted(st)) return;
    failed_ = true;
    printf("ftp: %s\n", st.ToString().c_str());
    if (!client_.connected()) printf("Connection closed; use open to connect again.\n");
  }

  // After a failed call: the server's reply if it gave one, else why there was none.
  void Explain(const Status& st) {
    if (client_.last_reply().code == 0 || strcmp(st.call(), kReplyInterruptedCall) == 0) {
      Failure(st);
      return;
    }
    Reply();
    failed_ = true;
  }

  // The command's final reply (printed), or nullptr when it got none.
  const san::ftp::Reply* Simple(const std::string& cmd) {
    Result<san::ftp::Reply> r = client_.Command(cmd);
    // A 1xx (quote RETR, ...) is followed by the command's final reply.
    while (r.ok() && r->positive_preliminary()) {
      Reply();
      r = client_.NextReply();
    }
    if (!r.ok()) {
      Failure(r.status());
      return nullptr;
    }
    Reply();
    return &client_.last_reply();
  }

  void Get(const std::string& remote, const std::string& local) {
    UniqueFd out(::open(local.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!out.valid()) {
      printf("local: %s: %s\n", local.c_str(), strerror(errno));
      failed_ = true;
      return;
    }
    Transfer(client_.Retrieve(remote, out.get()), local);
  }

  void Put(const std::string& local, const std::string& remote) {
    UniqueFd in(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
    if (!in.valid()) {
      printf("local: %s: %s\n", local.c_str(), strerror(errno));
      failed_ = true;
      return;
    }
    Transfer(client_.Store(remote, in.get()), "");
  }

  // kept: the local file of a download (named when an interrupted one leaves it partial).
  void Transfer(Result<TransferStats> stats, const std::string& kept) {
    progress_done();
    if (!stats.ok() && strcmp(stats.status().call(), kInterruptedCall) == 0) {
      Aborted(kept);
      return;
    }
    if (!stats.ok() && WasInterrupted(stats.status())) return;
    Reply();
    if (!stats.ok()) {
      if (strcmp(stats.status().call(), kLocalFileCall) == 0) {
        printf("local: %s\n", strerror(stats.status().code()));
        failed_ = true;
      } else {
        Failure(stats.status());
      }
      return;
    }
    printf("%s\n", FormatStats(stats.value()).c_str());
    if (client_.options().verbose) printf("Data connection: %s\n", stats->data_path.c_str());
  }

  // After Ctrl-C during a transfer: the server's replies (the transfer's 426, ABOR's 226), what
  // moved, and that a partial download stays (nothing the user did not ask for is removed).
  void Aborted(const std::string& kept) {
    failed_ = true;
    const auto& t = client_.aborted_transfer_reply();
    if (t.code) {
      printf("%d %s\n", t.code, t.text.c_str());
      if (client_.connected()) Reply();
    } else {
      printf("ftp: no reply to ABOR; connection closed.\n");
    }
    printf("Transfer aborted: %s\n", FormatStats(client_.last_stats()).c_str());
    struct stat st {};
    if (!kept.empty() && stat(kept.c_str(), &st) == 0) {
      printf("local: %s: partial file kept (%lld bytes)\n", kept.c_str(),
             static_cast<long long>(st.st_size));
    }
  }

  void progress_done() {
    if (progress_) progress_->Done();
    progress_.reset();
  }

  void StartProgress() {
    progress_.emplace(stdout, 0, hash_, true);
    client_.options().progress = [this](uint64_t b) {
      if (progress_) progress_->Update(b);
    };
  }

  void List(const std::string& verb, const std::string& path) {
    std::string text;
    client_.options().progress = nullptr;
    Result<TransferStats> s = client_.List(verb, path, &text);
    fwrite(text.data(), 1, text.size(), stdout);
    if (s.ok()) {
      Reply();
    } else {
      Explain(s.status());
    }
  }

  // Returns false on bye.
  bool Execute(const std::vector<std::string>& a) {
    const std::string& c = a[0];
    const size_t n = a.size();
    if (c == "bye" || c == "quit" || c == "exit") {
      if (client_.connected()) Simple("QUIT");
      return false;
    }
    if (c == "open") {
      if (Need(n >= 2, "open host [port]"))
        Open(a[1], n >= 3 ? static_cast<uint16_t>(atoi(a[2].c_str())) : 21);
    } else if (c == "help" || c == "?") {
      printf(
          "Commands: open user ls dir cd cdup pwd get recv put send mget mput delete mkdir rmdir\n"
          "rename size binary ascii passive hash verbose status quote close bye\n");
    } else if (c == "passive") {
      client_.options().passive = !client_.options().passive;
      printf("Passive mode %s.\n", client_.options().passive ? "on" : "off");
    } else if (c == "hash") {
      hash_ = !hash_;
      printf("Hash mark printing %s (1024 bytes/hash mark).\n", hash_ ? "on" : "off");
    } else if (c == "verbose") {
      client_.options().verbose = !client_.options().verbose;
      printf("Verbose mode %s.\n", client_.options().verbose ? "on" : "off");
    } else if (c == "lcd") {
      if (Need(n == 2, "lcd dir") && chdir(a[1].c_str()) != 0) {
        printf("local: %s: %s\n", a[1].c_str(), strerror(errno));
      }
    } else if (!Connected()) {
      failed_ = true;
    } else if (c == "user") {
      if (!Need(n >= 2, "user name [password]")) return true;
      std::string pass = n >= 3 ? a[2] : "";
      if (n < 3 && tty_) pass = getpass("Password: ");
      const Status st = client_.Login(a[1], pass);
      if (!st.ok() && st.code() != EACCES) {  // no reply to tell: interrupted, or the network's
        Failure(st);
        return true;
      }
      Reply();
      if (!st.ok()) {
        printf("Login failed.\n");
        return true;
      }
      // netkit-ftp's rule: a Unix server with 8-bit bytes gets binary transfers unless the user
      // asks for ascii; anything else stays in TYPE A, the RFC 959 default.
      Result<san::ftp::Reply> syst = client_.Command("SYST");
      if (!syst.ok() && WasInterrupted(syst.status())) return true;
      if (syst.ok() && syst->code == 215 && syst->text.rfind("UNIX Type: L8", 0) == 0) {
        const Status binary = client_.SetBinary(true);
        if (binary.ok()) {
          printf("Remote system type is UNIX.\nUsing binary mode to transfer files.\n");
        } else {
          WasInterrupted(binary);
        }
      }
    } else if (c == "ls" || c == "dir") {
      List(c == "ls" ? "NLST" : "LIST", n >= 2 ? a[1] : "");
    } else if (c == "cd") {
      if (Need(n == 2, "cd remote-dir")) Simple("CWD " + a[1]);
    } else if (c == "cdup") {
      Simple("CDUP");
    } else if (c == "pwd") {
      Simple("PWD");
    } else if (c == "binary" || c == "image") {
      Simple("TYPE I");  // the client follows the TYPE the server accepts (FtpClient::Command)
    } else if (c == "ascii") {
      Simple("TYPE A");
    } else if (c == "get" || c == "recv") {
      if (!Need(n >= 2, "get remote [local]")) return true;
      StartProgress();
      Get(a[1], n >= 3 ? a[2] : BaseOf(a[1]));
    } else if (c == "put" || c == "send") {
      if (!Need(n >= 2, "put local [remote]")) return true;
      StartProgress();
      Put(a[1], n >= 3 ? a[2] : BaseOf(a[1]));
    } else if (c == "mget") {
      for (size_t i = 1; i < n && !interrupt::Pending(); ++i) {
        std::string names;
        client_.options().progress = nullptr;
        const Result<TransferStats> listed = client_.List("NLST", a[i], &names);
        if (!listed.ok()) {
          Explain(listed.status());
          continue;
        }
        std::istringstream in(names);
        std::string name;
        while (std::getline(in, name)) {
          if (!name.empty() && name.back() == '\r') name.pop_back();
          if (name.empty()) continue;
          if (interrupt::Pending()) break;  // Ctrl-C ends the whole mget
          StartProgress();
          Get(name, BaseOf(name));
        }
      }
    } else if (c == "mput") {
      for (size_t i = 1; i < n && !interrupt::Pending(); ++i) {
        glob_t g{};
        if (glob(a[i].c_str(), 0, nullptr, &g) == 0) {
          for (size_t j = 0; j < g.gl_pathc && !interrupt::Pending(); ++j) {
            StartProgress();
            Put(g.gl_pathv[j], BaseOf(g.gl_pathv[j]));
          }
        } else {
          printf("local: %s: no match\n", a[i].c_str());
        }
        globfree(&g);
      }
    } else if (c == "delete") {
      if (Need(n == 2, "delete remote")) Simple("DELE " + a[1]);
    } else if (c == "mkdir") {
      if (Need(n == 2, "mkdir dir")) Simple("MKD " + a[1]);
    } else if (c == "rmdir") {
      if (Need(n == 2, "rmdir dir")) Simple("RMD " + a[1]);
    } else if (c == "rename") {
      if (!Need(n == 3, "rename from to")) return true;
      const san::ftp::Reply* from = Simple("RNFR " + a[1]);
      if (from && from->code == 350) Simple("RNTO " + a[2]);
    } else if (c == "size") {
      if (Need(n == 2, "size remote")) Simple("SIZE " + a[1]);
    } else if (c == "status") {
      printf("Type: %s; passive: %s; hash: %s; verbose: %s\n",
             client_.binary() ? "binary" : "ascii", client_.options().passive ? "on" : "off",
             hash_ ? "on" : "off", client_.options().verbose ? "on" : "off");
      Simple("STAT");
    } else if (c == "quote") {
      std::string rest;
      for (size_t i = 1; i < n; ++i) rest.append(i > 1 ? " " : "").append(a[i]);
      if (Need(n >= 2, "quote command")) Simple(rest);
    } else if (c == "close") {
      Simple("QUIT");
      client_.Close();
    } else {
      printf("?Invalid command.\n");
      failed_ = true;
    }
    return true;
  }

  int Loop() {
    std::string line;
    while (ReadLine(&line)) {
      const std::vector<std::string> args = Split(line);
      if (args.empty()) continue;
      interrupt::Clear();  // a Ctrl-C belongs to the command it interrupted
      if (!Execute(args)) break;
      fflush(stdout);
    }
    return failed_ ? kExitRemote : kExitOk;
  }

  ~Shell() { free(stdin_buf_); }

  ClientOptions options_;
  FtpClient client_;
  char* stdin_buf_ = nullptr;  // getline(3)'s buffer for commands from a non-terminal stdin
  size_t stdin_cap_ = 0;
  bool tty_ = isatty(STDIN_FILENO);
  bool hash_ = false;
  bool failed_ = false;
  std::optional<Progress> progress_;
};

}  // namespace

int RunInteractive(const std::string& host, uint16_t port, const ClientOptions& options) {
  Shell shell(options);
  if (!host.empty()) shell.Open(host, port);
  return shell.Loop();
}

}  // namespace san::ftp
