// Logging: one line per event, filtered by SAN_LOG, prefixed "sanlib[pid] level:".
//
// Where a line goes (SAN_LOG_FILE): a file to append to, "stderr", "syslog" (facility daemon,
// ident "sanlib") or "none". Unset: fd 2, unless fd 2 is a network socket -- under inetd and in
// vsftpd's sessions it is the client's connection, where a line of ours would be read as the
// server's output -- and then syslog. A file that cannot be opened falls back to that rule. A
// vfork child (its parent's memory, its own fds) writes only to its fd 2: lines for a file or
// syslog are dropped there.
//
// Thread-safe (each line is one write(2) or one syslog(3)). Safe to call from the close and
// connection threads; not async-signal-safe (sanlib installs no signal handlers).
#pragma once

#include <stddef.h>

#include <string>

#include "sanlib/common/config.h"

namespace san {

void LogAt(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
bool LogEnabled(LogLevel level);

// Where a line goes under `log_file` (SAN_LOG_FILE's value) when `fd2` is the process's fd 2.
enum class LogSink { kFd2, kFile, kSyslog, kNone };
LogSink ChooseLogSink(const std::string& log_file, int fd2);
// Writes one finished line (ending in '\n') where `log_file` says (the rule above).
void WriteLogLine(const std::string& log_file, LogLevel level, const char* line, size_t len);

}  // namespace san

#define SAN_LOG_ERROR(...) ::san::LogAt(::san::LogLevel::kError, __VA_ARGS__)
#define SAN_LOG_WARN(...) ::san::LogAt(::san::LogLevel::kWarn, __VA_ARGS__)
#define SAN_LOG_INFO(...) ::san::LogAt(::san::LogLevel::kInfo, __VA_ARGS__)
#define SAN_LOG_DEBUG(...)                                \
  do {                                                    \
    if (::san::LogEnabled(::san::LogLevel::kDebug))       \
      ::san::LogAt(::san::LogLevel::kDebug, __VA_ARGS__); \
  } while (0)
