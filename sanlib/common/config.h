// Config: every SAN_* setting, parsed from the environment in exactly one place (and from the
// system-wide settings file, config_file.h, for what the environment leaves unset).
//
// Config::Get() parses once (first call, thread-safe via a function-local static) and then returns
// the same immutable object; tests build their own Config values instead of touching the
// environment. Each setting is listed in kSettings with its variable, default and meaning, which is
// what `sanrun --help` and docs print. A malformed value is reported once on stderr and the default
// kept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sanlib/common/peer_users.h"

namespace san {

enum class ProviderChoice { kAuto, kShm, kVerbs, kOff };
enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

struct Config {
  ProviderChoice provider = ProviderChoice::kAuto;
  uint32_t window = 32;             // w: DATA packets in flight per direction
  uint32_t ack_threshold = 16;      // t: delayed ACKs before an explicit ACK (t < w)
  bool combine = true;              // small-message combining (TCP_NODELAY turns it off per socket)
  uint32_t combine_timer_us = 200;  // flush a partly filled combine buffer after this long
  uint32_t copy_threshold =
      2048;                // sends up to this size are staged/combined; above, sent directly
  uint32_t mtu = 32768;    // max DATA payload; capped by the provider's
  uint32_t spin_us = 50;   // spin this long before blocking on the doorbell (0 = block at once)
  bool spin_adapt = true;  // SAN_SPIN_ADAPT: spin less while the CPU is contended
                           // (common/spin_governor.h); off: always spin_us
  // Single copy (docs/protocol.md "Single copy"): a receiver blocked in recv() with nothing queued
  // and a buffer of at least single_copy_min bytes lets the sender write straight into it
  // (process_vm_writev on shm) instead of through the receive buffers: one copy instead of two.
  // Off by default: measured on this project's 2-vCPU VM, process_vm_writev (page pinning per
  // call) is slower than the ring's two user-space copies at every size (docs/fabric.md).
  bool single_copy = false;
  uint32_t single_copy_min = 65536;
  // Zero copy over verbs (docs/protocol.md "Large messages over verbs"): a send whose first buffer
  // has at least this many bytes is posted from the application's memory, registered for the
  // call, instead of through a staging slot (0 = never; providers with kCapRegisteredSend only).
  uint32_t zero_copy_min = 256u << 10;
  uint32_t linger_ms = 2000;  // how long the close thread waits for FIN/FINACK before aborting
  // Connection set-up (docs/sockets.md "Connection set-up"). eager (the default): a client sets
  // up its shm channel with the listener's rendezvous before connect() returns. late: every
  // connection starts on kernel TCP and both ends move it to shm once it has lived
  // upgrade_delay_us or carried upgrade_bytes (short connections cost what TCP costs). A
  // connection the eager set-up could not equip (its listener's owner gone, no rendezvous) is
  // moved late in either mode.
  bool late_setup = false;
  uint32_t upgrade_delay_us = 20000;
  uint32_t upgrade_bytes = 256u << 10;  // 0: by time only
  // A connection whose data calls (this end's sends and receives that moved bytes) reach this
  // count is moved before the delay: it has proved to be a chatty one (0: not by calls).
  uint32_t upgrade_calls = 64;
  // How long one try of a move lasts at each end (the lower end's rendezvous open, the upper
  // end dialling it); one that met no peer is tried again when the connection is in use.
  uint32_t upgrade_try_ms = 10000;
  // SAN_PEER_USERS: which users' processes may be SAN peers (common/peer_users.h), parsed here
  // once (a malformed value keeps the default, any).
  PeerUsers peer_users;
  LogLevel log_level = LogLevel::kWarn;
  // SAN_LOG_FILE: where log lines go (common/log.h): "" = stderr unless fd 2 is a network socket
  // (then syslog), "stderr", "syslog", "none", or a file to append to.
  std::string log_file;
  // Compatibility layer: which sockets a preloaded program makes SAN-capable (compat/rules.h).
  std::string rules;       // SAN_RULES: rules separated by ';'
  std::string rules_file;  // SAN_RULES_FILE: a file of rules, one per line, read after SAN_RULES
  std::string report;      // SAN_REPORT: file this process appends a usage line to at exit
  // The system-wide settings file read (config_file.h; "" if none) and its rule lines, which the
  // compatibility layer applies after SAN_RULES and SAN_RULES_FILE.
  std::string config_file;
  struct FileRule {
    int line;
    int column;
    std::string text;
  };
  std::vector<FileRule> file_rules;

  // The process-wide configuration, parsed from the environment and the system-wide settings
  // file (config_file.h) on first use.
  static const Config& Get();
  // Parses from an explicit lookup (tests); `errors` receives one line per malformed variable.
  static Config Parse(const char* (*getenv_fn)(const char*), std::vector<std::string>* errors);
};

struct SettingInfo {
  const char* variable;
  const char* default_value;
  const char* meaning;
};
// Every SAN_* variable, for --help output and docs.
const std::vector<SettingInfo>& Settings();

}  // namespace san
