// Test support for the FTP tests: temporary directories, files, the programs of
// support/program.h, a running ftpd (standalone, on a port it picks) and a raw control connection
// for hostile-client tests. Test-only; every process started here is stopped and reaped.
#pragma once

#include <string>
#include <vector>

#include "support/program.h"

namespace san::ftp::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadFile(const std::string& path);  // "" if missing
void WriteFile(const std::string& path, const std::string& content);
bool Exists(const std::string& path);
// Deterministic pseudo-random bytes (so a mismatch is reproducible), n bytes.
std::string RandomBytes(size_t n, unsigned seed);
// FNV-1a 64 of a file's bytes, as hex ("" if unreadable): the tests' checksum.
std::string Checksum(const std::string& path);
// Programs (support/program.h): RunProgram (to completion, output captured), Interactive (stdin
// typed by the test), Installed (on PATH, or an absolute path that exists).
using testing_support::Installed;
using testing_support::Interactive;
using testing_support::RunProgram;
using testing_support::RunResult;

// A program running in the background until Stop: a process group of its own, stdin /dev/null,
// output appended to log_path ("" = inherited). Stop (and the destructor) send SIGTERM, SIGKILL
// after 5 s, then kill what is left in its group (a daemon's sessions).
class Process : public testing_support::Program {
 public:
  bool Start(const std::vector<std::string>& argv, const std::string& log_path = "");
  void Stop() { Shutdown(); }
};

// Wait up to timeout_ms until the file at path (or an entry of dir whose name contains
// name_contains) is at least `bytes` long: for "the transfer is running".
bool WaitForFileSize(const std::string& path, uint64_t bytes, int timeout_ms);
bool WaitForEntrySize(const std::string& dir, const std::string& name_contains, uint64_t bytes,
                      int timeout_ms);
// A sparse file of `bytes` (zeros that take no space): a transfer that cannot end soon.
bool MakeSparseFile(const std::string& path, uint64_t bytes);

// A loopback TCP port free right now (bound and released): for peers that cannot report the
// port they chose. Another process may take it before the caller does.
int FreeLoopbackPort();

// Whether something accepts connections on the loopback port within 10 s.
bool AcceptsConnections(int port);

// vsftpd (root only, with the 'ftp' user) serving anonymous sessions on 127.0.0.1 from root()
// (read-only, root's) with root()/incoming writable for uploads; started with a generated
// config, stopped on destruction. ok() false if it could not be started (skip_reason() says why
// when it is not installed or cannot run here).
class VsftpdServer {
 public:
  VsftpdServer();
  bool ok() const { return port_ > 0; }
  const std::string& skip_reason() const { return skip_; }
  int port() const { return port_; }
  std::string root() const { return dir_ / "anon"; }
  std::string base_url() const {
    return "ftp://anonymous:x@127.0.0.1:" + std::to_string(port_) + "/";
  }
  std::string log_path() const { return dir_ / "vsftpd.out"; }
  std::string log() const { return ReadFile(log_path()); }

 private:
  TempDir dir_;
  Process process_;
  int port_ = -1;
  std::string skip_;
};

// ftpd -D on 127.0.0.1 with user alice/secret (root: root(), read-write; system user
// alice_system_user if given) and bob/secret (root: root(), read-only); extra flags appended.
class FtpdServer {
 public:
  explicit FtpdServer(std::vector<std::string> extra = {},
                      const std::string& alice_system_user = "");
  bool ok() const { return port_ > 0; }
  int port() const { return port_; }
  const std::string& root() const { return root_; }
  const TempDir& dir() const { return dir_; }
  std::string xferlog() const { return dir_ / "xferlog"; }
  std::string url(const std::string& path, const std::string& user = "alice") const;
  std::string log() const { return ReadFile(dir_ / "ftpd.log"); }
  int pid() const { return process_.pid(); }  // the daemon (sessions are its children)

 private:
  TempDir dir_;
  std::string root_;
  Process process_;
  int port_ = -1;
};

// A kernel TCP control connection for driving a server by hand.
class RawClient {
 public:
  explicit RawClient(int port);
  ~RawClient();
  bool connected() const { return fd_ >= 0; }
  bool Send(const std::string& bytes);
  // Next complete reply ("227 Entering..." text of the last line; multi-line joined with '\n'),
  // or "" on EOF/timeout. code() is its code (0 on EOF/timeout).
  std::string Reply(int timeout_ms = 10000);
  int code() const { return code_; }
  // Sends line + CRLF, returns the reply code.
  int Cmd(const std::string& line, int timeout_ms = 10000);
  // True if the server closed the connection (EOF) within timeout_ms.
  bool ClosedByPeer(int timeout_ms = 10000);
  int Login(const std::string& user = "alice", const std::string& pass = "secret");
  // PASV and connect: the data socket fd, -1 on failure.
  int PassiveData();
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  int code_ = 0;
  std::string buffer_;
};

// Reads a socket to EOF (bounded by timeout_ms) and closes it.
std::string ReadAll(int fd, int timeout_ms = 10000);

}  // namespace san::ftp::testing
