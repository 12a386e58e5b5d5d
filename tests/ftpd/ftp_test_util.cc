#include "ftp_test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "ftp/protocol/address.h"
#include "ftpd/auth/users.h"

namespace san::ftp::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  const char* base = getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/ftptest.XXXXXX";
  char* made = mkdtemp(templ.data());
  path_ = made ? made : "";
  if (!path_.empty()) chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

std::string RandomBytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

std::string Checksum(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  uint64_t h = 1469598103934665603ull;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h = (h ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
    }
  }
  char hex[32];
  snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

bool Process::Start(const std::vector<std::string>& argv, const std::string& log_path) {
  testing_support::ProgramSpec spec;
  spec.argv = argv;
  spec.own_group = true;
  spec.stdin_path = "/dev/null";
  spec.stdout_path = spec.stderr_path = log_path;
  spec.append = true;
  spec.stop_signal = SIGTERM;
  spec.stop_timeout_ms = 5000;
  return Program::Start(spec);
}

FtpdServer::FtpdServer(std::vector<std::string> extra, const std::string& alice_system_user) {
  root_ = dir_ / "root";
  mkdir(root_.c_str(), 0755);
  Result<std::string> hash = HashPassword("secret");
  if (!hash.ok()) return;
  std::string alice = "alice:" + *hash + ":" + root_ + ":rw";
  if (!alice_system_user.empty()) alice.append(":").append(alice_system_user);
  WriteFile(dir_ / "users", alice + "\nbob:" + *hash + ":" + root_ + ":ro\n");
  std::vector<std::string> argv = {FTPD_BIN,
                                   "-D",
                                   "--listen-address",
                                   "127.0.0.1",
                                   "-p",
                                   "0",
                                   "--port-file",
                                   dir_ / "port",
                                   "--users-file",
                                   dir_ / "users",
                                   "--xferlog",
                                   dir_ / "xferlog",
                                   "--login-fail-delay-ms",
                                   "50"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  if (!process_.Start(argv, dir_ / "ftpd.log")) return;
  for (int i = 0; i < 1000 && port_ <= 0; ++i) {  // up to 10 s
    const std::string p = ReadFile(dir_ / "port");
    if (!p.empty()) port_ = atoi(p.c_str());
    if (port_ <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string FtpdServer::url(const std::string& path, const std::string& user) const {
  return "ftp://" + user + ":secret@127.0.0.1:" + std::to_string(port_) + "/" + path;
}

RawClient::RawClient(int port) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd_);
    fd_ = -1;
  }
}

RawClient::~RawClient() {
  if (fd_ >= 0) close(fd_);
}

bool RawClient::Send(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string RawClient::Reply(int timeout_ms) {
  code_ = 0;
  std::string text;
  bool multi = false;
  std::string multi_code;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const size_t nl = buffer_.find("\r\n");
    if (nl != std::string::npos) {
      const std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 2);
      if (!multi) {
        if (line.size() >= 4 && line[3] == '-') {
          multi = true;
          multi_code = line.substr(0, 3);
          text = line.substr(4);
          continue;
        }
        code_ = atoi(line.substr(0, 3).c_str());
        return line.size() > 4 ? line.substr(4) : "";
      }
      if (line.size() >= 4 && line.substr(0, 3) == multi_code && line[3] == ' ') {
        code_ = atoi(multi_code.c_str());
        return text + "\n" + line.substr(4);
      }
      text += "\n" + line;
      continue;
    }
    const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          deadline - std::chrono::steady_clock::now())
                                          .count());
    if (left <= 0) return "";
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, left) <= 0) return "";
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return "";
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

int RawClient::Cmd(const std::string& line, int timeout_ms) {
  if (!Send(line + "\r\n")) return 0;
  Reply(timeout_ms);
  return code_;
}

bool RawClient::ClosedByPeer(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;
    }
  }
  return false;
}

int RawClient::Login(const std::string& user, const std::string& pass) {
  Reply();
  if (code_ != 220) return 0;  // greeting
  Cmd("USER " + user);
  return Cmd("PASS " + pass);
}

int RawClient::PassiveData() {
  if (!Send("PASV\r\n")) return -1;
  const std::string text = Reply();
  if (code_ != 227) return -1;
  std::optional<HostPort> hp = ParsePasvReply(text);
  if (!hp) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&hp->addr), hp->len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string ReadAll(int fd, int timeout_ms) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[65536];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

bool WaitForFileSize(const std::string& path, uint64_t bytes, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) >= bytes) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool WaitForEntrySize(const std::string& dir, const std::string& name_contains, uint64_t bytes,
                      int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      struct stat st {};
      if (e.path().filename().string().find(name_contains) != std::string::npos &&
          stat(e.path().c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) >= bytes) {
        return true;
      }
    }
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool MakeSparseFile(const std::string& path, uint64_t bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  const bool ok = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
  close(fd);
  return ok;
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

bool AcceptsConnections(int port) {
  for (int i = 0; i < 1000; ++i) {  // up to 10 s
    RawClient c(port);
    if (c.connected()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

VsftpdServer::VsftpdServer() {
  if (!Installed("/usr/sbin/vsftpd")) {
    skip_ = "vsftpd is not installed";
    return;
  }
  if (geteuid() != 0) {
    skip_ = "vsftpd needs root";
    return;
  }
  passwd* ftp = getpwnam("ftp");
  if (!ftp) {
    skip_ = "no 'ftp' user for vsftpd's anonymous sessions";
    return;
  }
  mkdir(root().c_str(), 0755);  // owned by root, not writable by ftp: vsftpd insists
  mkdir((root() + "/incoming").c_str(), 0755);
  if (chown((root() + "/incoming").c_str(), ftp->pw_uid, ftp->pw_gid) != 0) return;
  mkdir((dir_ / "empty").c_str(), 0755);  // vsftpd's secure_chroot_dir: empty, root's
  for (int attempt = 0; attempt < 5 && port_ <= 0; ++attempt) {
    const int p = FreeLoopbackPort();
    WriteFile(dir_ / "vsftpd.conf",
              "listen=YES\nlisten_ipv6=NO\nbackground=NO\nlisten_address=127.0.0.1\n"
              "listen_port=" +
                  std::to_string(p) +
                  "\n"
                  "anonymous_enable=YES\nlocal_enable=NO\nno_anon_password=YES\nanon_root=" +
                  root() +
                  "\nwrite_enable=YES\nanon_upload_enable=YES\nanon_umask=022\n"
                  "connect_from_port_20=NO\nseccomp_sandbox=NO\nisolate=NO\nisolate_network=NO\n"
                  "secure_chroot_dir=" +
                  dir_ / "empty" + "\nxferlog_enable=NO\nsyslog_enable=NO\nvsftpd_log_file=" +
                  dir_ / "vsftpd.log" + "\ndual_log_enable=NO\n");
    process_.Stop();
    if (!process_.Start({"/usr/sbin/vsftpd", dir_ / "vsftpd.conf"}, dir_ / "vsftpd.out")) return;
    if (AcceptsConnections(p)) port_ = p;
  }
}

}  // namespace san::ftp::testing
