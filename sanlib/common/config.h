// Config: every SAN_* setting, parsed from the environment in exactly one place.
//
// Config::Get() parses once (first call, thread-safe via a function-local static) and then returns
// the same immutable object; tests build their own Config values instead of touching the environment.
// Each setting is listed in kSettings with its variable, default and meaning, which is what
// `sanrun --help` and docs print. A malformed value is reported once on stderr and the default kept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace san {

enum class ProviderChoice { kAuto, kShm, kVerbs, kOff };
enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

struct Config {
  ProviderChoice provider = ProviderChoice::kAuto;
  uint32_t window = 32;              // w: DATA packets in flight per direction
  uint32_t ack_threshold = 16;       // t: delayed ACKs before an explicit ACK (t < w)
  bool combine = true;               // small-message combining (TCP_NODELAY turns it off per socket)
  uint32_t combine_timer_us = 200;   // flush a partly filled combine buffer after this long
  uint32_t copy_threshold = 2048;    // sends up to this size are staged/combined; above, sent directly
  uint32_t mtu = 32768;              // max DATA payload; capped by the provider's
  uint32_t spin_us = 50;             // spin this long before blocking on the doorbell (0 = block at once)
  uint32_t linger_ms = 2000;         // how long the close thread waits for FIN/FINACK before aborting
  LogLevel log_level = LogLevel::kWarn;

  // The process-wide configuration, parsed from the environment on first use.
  static const Config& Get();
  // Parses from an explicit lookup (tests); `errors` receives one line per malformed variable.
  static Config Parse(const char* (*getenv_fn)(const char*), std::vector<std::string>* errors);

  // P = w + w/t + 1: receive descriptors pre-posted per connection (SOVIA 4.3).
  uint32_t receive_depth() const { return window + window / ack_threshold + 1; }
};

struct SettingInfo {
  const char* variable;
  const char* default_value;
  const char* meaning;
};
// Every SAN_* variable, for --help output and docs.
const std::vector<SettingInfo>& Settings();

}  // namespace san
