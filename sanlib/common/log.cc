#include "sanlib/common/log.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "sanlib/common/fd_placement.h"
#include "sanlib/common/kernel.h"
#include "sanlib/common/this_pid.h"

namespace san {
namespace {

int SyslogPriority(LogLevel level) {
  switch (level) {
    case LogLevel::kError:
      return LOG_ERR;
    case LogLevel::kWarn:
      return LOG_WARNING;
    case LogLevel::kInfo:
      return LOG_INFO;
    default:
      return LOG_DEBUG;
  }
}

// Whether fd is a socket of a network family (a peer would read what we write).
bool IsNetworkSocket(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  int domain = 0;
  socklen_t len = sizeof domain;
  // The kernel's call: the compat layer interposes getsockopt, and fd 2 may be a SAN socket.
  if (kernel::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return true;
  return domain != AF_UNIX;  // AF_UNIX: journald's stream, a pipe-like log collector
}

// The SAN_LOG_FILE file, opened once per process (fork children share it: O_APPEND keeps lines
// whole); -1 if it cannot be opened.
int LogFileFd(const std::string& path) {
  static std::once_flag once;
  static int fd = -1;
  std::call_once(once, [&] {
    const int raw = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (raw >= 0) fd = PlaceLow(raw);
  });
  return fd;
}

void ToSyslog(LogLevel level, const char* line, size_t len) {
  static std::once_flag once;
  std::call_once(once, [] { openlog("sanlib", LOG_PID | LOG_NDELAY, LOG_DAEMON); });
  // The prefix "sanlib[pid] level: " is syslog's own (ident, pid, priority): only the message.
  const char* text = line;
  const char* colon = static_cast<const char*>(memchr(line, ':', len));
  if (colon && colon + 2 <= line + len) text = colon + 2;
  const int n = static_cast<int>(line + len - text) - 1;  // without the '\n'
  syslog(SyslogPriority(level), "%.*s", std::max(n, 0), text);
}

}  // namespace

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(Config::Get().log_level);
}

LogSink ChooseLogSink(const std::string& log_file, int fd2) {
  if (log_file == "none") return LogSink::kNone;
  if (log_file == "syslog") return LogSink::kSyslog;
  if (log_file == "stderr") return LogSink::kFd2;
  if (!log_file.empty()) return LogSink::kFile;
  return IsNetworkSocket(fd2) ? LogSink::kSyslog : LogSink::kFd2;
}

void WriteLogLine(const std::string& log_file, LogLevel level, const char* line, size_t len) {
  LogSink sink = ChooseLogSink(log_file, STDERR_FILENO);
  // A vfork child shares the process's memory but not its fds: a sink it opened (the file's,
  // syslog's socket) would be recorded for the parent, which would then write to a number of its
  // own. Its lines go to its fd 2 or nowhere.
  if (sink != LogSink::kFd2 && KernelPid() != ThisPid()) return;
  int fd = STDERR_FILENO;
  if (sink == LogSink::kFile) {
    fd = LogFileFd(log_file);
    if (fd < 0) sink = ChooseLogSink("", STDERR_FILENO);
  }
  switch (sink) {
    case LogSink::kNone:
      return;
    case LogSink::kSyslog:
      return ToSyslog(level, line, len);
    default:
      // Straight to the kernel: the compat layer may interpose write().
      kernel::write(sink == LogSink::kFile ? fd : STDERR_FILENO, line, len);
  }
}

void LogAt(LogLevel level, const char* fmt, ...) {
  if (!LogEnabled(level)) return;
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  char line[1024];
  int n = snprintf(line, sizeof line, "sanlib[%d] %s: ", static_cast<int>(getpid()),
                   kNames[static_cast<int>(level)]);
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
  va_end(ap);
  size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : std::min<size_t>(m, sizeof line - n - 2));
  line[len++] = '\n';
  WriteLogLine(Config::Get().log_file, level, line, len);
}

}  // namespace san
