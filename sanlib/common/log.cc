#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <algorithm>
#include <unistd.h>

namespace san {

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) <= static_cast<int>(Config::Get().log_level);
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
  // Straight to the kernel: the compat layer may interpose write().
  ::syscall(SYS_write, 2, line, len);
}

}  // namespace san
