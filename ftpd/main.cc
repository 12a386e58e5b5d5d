// ftpd: an FTP server over SAN sockets. Standalone (-D) or inetd/systemd mode (fd 0).
// See docs/ftp.md.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "ftp/net/socket.h"
#include "ftpd/auth/users.h"
#include "ftpd/server/config.h"
#include "ftpd/server/daemon.h"
#include "ftpd/server/session.h"
#include "ftpd/server/xferlog.h"

int main(int argc, char** argv) {
  using namespace san::ftp;
  Config config;
  std::string error, help;
  if (!ParseConfig(argc, argv, &config, &error, &help)) {
    fprintf(stderr, "ftpd: %s (try --help)\n", error.c_str());
    return 2;
  }
  if (config.show_help) {
    fputs(help.c_str(), stdout);
    return 0;
  }
  if (config.hash_password) {
    std::string pw;
    std::getline(std::cin, pw);
    san::Result<std::string> h = HashPassword(pw);
    if (!h.ok()) {
      fprintf(stderr, "ftpd: %s\n", h.status().ToString().c_str());
      return 1;
    }
    printf("%s\n", h->c_str());
    return 0;
  }
  std::optional<Users> users;
  if (!config.users_file.empty()) {
    san::Result<Users> u = Users::Load(config.users_file, &error);
    if (!u.ok()) {
      fprintf(stderr, "ftpd: %s\n", error.c_str());
      return 2;
    }
    users.emplace(std::move(u.value()));
  }
  XferLog log;
  if (!log.Open(config.xferlog)) {
    perror(("ftpd: " + config.xferlog).c_str());
    return 2;
  }
  if (config.daemon && !config.session) {
    // The users file and the log were checked above, so a mistake shows now, not per session.
    // Sessions are this program again, on fd 0, told so by --session.
    std::vector<char*> args(argv, argv + argc);
    static char session_flag[] = "--session";
    args.push_back(session_flag);
    args.push_back(nullptr);
    return RunDaemon(config, args.data());
  }
  IgnoreSigpipe();
  // An upload past RLIMIT_FSIZE must fail with EFBIG (451 to the client, the partial file
  // removed), not kill the session with SIGXFSZ.
  signal(SIGXFSZ, SIG_IGN);
  // Under inetd, stdout and stderr are often the control socket itself: a log line from any
  // library would corrupt the dialogue, so they go to /dev/null instead.
  // (Only when they are the connection itself: under systemd, stderr is journald's socket.)
  struct stat conn {
  }, err{};
  if (fstat(STDIN_FILENO, &conn) == 0 && fstat(STDERR_FILENO, &err) == 0 && S_ISSOCK(err.st_mode) &&
      conn.st_dev == err.st_dev && conn.st_ino == err.st_ino) {
    const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (devnull >= 0) {
      dup2(devnull, STDOUT_FILENO);
      dup2(devnull, STDERR_FILENO);
      close(devnull);
    }
  }
  // inetd / systemd Accept=yes: the control connection is fd 0 (a kernel socket; AUTH SAN may
  // upgrade it). stdout and stderr may be the socket too: say nothing on them.
  Session session(config, users ? &*users : nullptr, &log, Socket(0));
  session.Run();
  return 0;
}
