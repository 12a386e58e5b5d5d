// Logging: one line per event to stderr, filtered by SAN_LOG, prefixed "sanlib[pid]".
//
// Thread-safe (each line is one write(2)). Safe to call from the close and connection threads; not
// async-signal-safe (the fatal-signal path writes its own fixed messages).
#pragma once

#include "common/config.h"

namespace san {

void LogAt(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
bool LogEnabled(LogLevel level);

}  // namespace san

#define SAN_LOG_ERROR(...) ::san::LogAt(::san::LogLevel::kError, __VA_ARGS__)
#define SAN_LOG_WARN(...) ::san::LogAt(::san::LogLevel::kWarn, __VA_ARGS__)
#define SAN_LOG_INFO(...) ::san::LogAt(::san::LogLevel::kInfo, __VA_ARGS__)
#define SAN_LOG_DEBUG(...)                                                   \
  do {                                                                       \
    if (::san::LogEnabled(::san::LogLevel::kDebug)) ::san::LogAt(::san::LogLevel::kDebug, __VA_ARGS__); \
  } while (0)
