#include "sanlib/common/config.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "sanlib/common/config_file.h"
#include "sanlib/common/log.h"

namespace san {
namespace {

const char* SystemGetenv(const char* name) { return ::getenv(name); }

bool ParseUnsigned(const char* text, uint32_t min, uint32_t max, uint32_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long v = strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool ParseBool(const char* text, bool* out) {
  if (!strcmp(text, "1") || !strcmp(text, "on") || !strcmp(text, "yes") || !strcmp(text, "true")) {
    *out = true;
    return true;
  }
  if (!strcmp(text, "0") || !strcmp(text, "off") || !strcmp(text, "no") || !strcmp(text, "false")) {
    *out = false;
    return true;
  }
  return false;
}

bool ParseProvider(const char* text, ProviderChoice* out) {
  static const struct {
    const char* name;
    ProviderChoice value;
  } kNames[] = {{"auto", ProviderChoice::kAuto},
                {"shm", ProviderChoice::kShm},
                {"verbs", ProviderChoice::kVerbs},
                {"off", ProviderChoice::kOff}};
  for (const auto& n : kNames) {
    if (!strcmp(text, n.name)) {
      *out = n.value;
      return true;
    }
  }
  return false;
}

bool ParseLogLevel(const char* text, LogLevel* out) {
  static const char* const kNames[] = {"error", "warn", "info", "debug"};
  for (int i = 0; i < 4; ++i) {
    if (!strcmp(text, kNames[i])) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

}  // namespace

const std::vector<SettingInfo>& Settings() {
  static const std::vector<SettingInfo> kSettings = {
      {"SAN_PROVIDER", "auto",
       "auto|shm|verbs|off: which fabric carries SAN sockets (off = kernel TCP)"},
      {"SAN_WINDOW", "32", "w, DATA packets in flight per direction (2..255)"},
      {"SAN_ACK_THRESHOLD", "16", "t, delayed ACKs before an explicit ACK (1..w-1)"},
      {"SAN_COMBINE", "on",
       "combine small sends into one packet (TCP_NODELAY turns it off per socket)"},
      {"SAN_COMBINE_US", "200",
       "flush a partly filled combine buffer after this many microseconds"},
      {"SAN_COPY_THRESHOLD", "2048", "sends up to this many bytes are staged and combined"},
      {"SAN_MTU", "32768", "largest DATA payload in bytes (4096..1048576, capped by the provider)"},
      {"SAN_SPIN_US", "50", "spin this long before sleeping on the doorbell (0 = sleep at once)"},
      {"SAN_SPIN_ADAPT", "on",
       "spin less while this thread's CPU is contended (involuntary switches); off: always "
       "SAN_SPIN_US"},
      {"SAN_SINGLE_COPY", "off",
       "on: a sender writes large messages straight into a waiting receiver's buffer "
       "(process_vm_writev; falls back by itself where the kernel refuses). Off by default: slower "
       "than two copies where measured"},
      {"SAN_SINGLE_COPY_MIN", "65536",
       "smallest recv/send (bytes) that uses single copy (4096..1073741824)"},
      {"SAN_ZERO_COPY_MIN", "262144",
       "verbs: sends of at least this many bytes go from the application's memory, registered "
       "for the call, without a staging copy (0 or off = never)"},
      {"SAN_LINGER_MS", "2000", "close thread waits this long for FIN/FINACK before aborting"},
      {"SAN_SETUP", "eager",
       "eager|late (sanrun's default: late): eager sets up a local connection's shm channel in "
       "connect(); late starts "
       "every connection on kernel TCP and moves it to shm once it has lived "
       "SAN_UPGRADE_DELAY_US or carried SAN_UPGRADE_BYTES (a short connection costs what TCP "
       "costs)"},
      {"SAN_UPGRADE_DELAY_US", "20000",
       "how long a local connection runs on kernel TCP before both ends move it to shm, and how "
       "long it must then have been in use, its calls never that far apart (late set-up, and "
       "connections the eager set-up could not equip)"},
      {"SAN_UPGRADE_BYTES", "262144",
       "a local connection that has carried this many bytes (both ways) moves to shm at once, "
       "before SAN_UPGRADE_DELAY_US (0 = by time only)"},
      {"SAN_UPGRADE_CALLS", "64",
       "a local connection whose data calls that moved bytes reach this count (at one end) moves "
       "to shm at once, before SAN_UPGRADE_DELAY_US: a chatty request/response connection (0 = "
       "not by calls)"},
      {"SAN_UPGRADE_TRY_MS", "10000",
       "how long one try of a late move lasts: the lower end keeps its private rendezvous open, "
       "the upper end dials it, this long; an end whose try met no peer tries again once the "
       "connection is in use (4 tries, then it stays kernel TCP)"},
      {"SAN_PEER_USERS", "any",
       "which users' processes may be SAN peers: any; same (our own uid only); or a list of "
       "uids, user names and @groups (ours always). A connection refused stays kernel TCP, "
       "with the reason"},
      {"SAN_LOG", "warn", "error|warn|info|debug"},
      {"SAN_LOG_FILE", "",
       "where log lines go: a file to append to, stderr, syslog or none; unset: stderr, unless "
       "fd 2 is a network socket (inetd, vsftpd sessions: the client's connection), then syslog"},
      {"SAN_RULES", "",
       "preload: 'allow|deny [prog=GLOB] [port=N[-M]] [addr=IP[/LEN]]; ...', first match wins"},
      {"SAN_REPORT", "",
       "append one line to this file at exit: program, SAN/TCP connections, SAN bytes"},
      {"SAN_RULES_FILE", "",
       "preload: a file of such rules, one per line ('#' comments), after SAN_RULES"},
      {"SAN_CONFIG_FILE", SystemConfigFile(),
       "the system-wide settings file (san(7)): SAN_NAME = value lines and rules; none: read no "
       "file. The environment wins over it"},
  };
  return kSettings;
}

Config Config::Parse(const char* (*getenv_fn)(const char*), std::vector<std::string>* errors) {
  Config c;
  auto bad = [&](const char* var, const char* value) {
    if (errors)
      errors->push_back(std::string(var) + "=" + value + " is not valid; using the default");
  };
  auto num = [&](const char* var, uint32_t min, uint32_t max, uint32_t* field) {
    if (const char* v = getenv_fn(var)) {
      if (!ParseUnsigned(v, min, max, field)) bad(var, v);
    }
  };
  if (const char* v = getenv_fn("SAN_PROVIDER")) {
    if (!ParseProvider(v, &c.provider)) bad("SAN_PROVIDER", v);
  }
  num("SAN_WINDOW", 2, 255, &c.window);
  num("SAN_ACK_THRESHOLD", 1, 254, &c.ack_threshold);
  if (c.ack_threshold >= c.window) {
    if (errors) errors->push_back("SAN_ACK_THRESHOLD must be below SAN_WINDOW; using window/2");
    c.ack_threshold = c.window / 2;
  }
  if (const char* v = getenv_fn("SAN_COMBINE")) {
    if (!ParseBool(v, &c.combine)) bad("SAN_COMBINE", v);
  }
  num("SAN_COMBINE_US", 0, 1000000, &c.combine_timer_us);
  num("SAN_COPY_THRESHOLD", 0, 1 << 20, &c.copy_threshold);
  num("SAN_MTU", 4096, 1 << 20, &c.mtu);
  num("SAN_SPIN_US", 0, 10000000, &c.spin_us);
  if (const char* v = getenv_fn("SAN_SPIN_ADAPT")) {
    if (!ParseBool(v, &c.spin_adapt)) bad("SAN_SPIN_ADAPT", v);
  }
  if (const char* v = getenv_fn("SAN_SINGLE_COPY")) {
    if (!ParseBool(v, &c.single_copy)) bad("SAN_SINGLE_COPY", v);
  }
  num("SAN_SINGLE_COPY_MIN", 4096, 1u << 30, &c.single_copy_min);
  if (const char* v = getenv_fn("SAN_ZERO_COPY_MIN")) {
    if (strcmp(v, "off") == 0) {
      c.zero_copy_min = 0;
    } else if (!ParseUnsigned(v, 0, 1u << 30, &c.zero_copy_min)) {
      bad("SAN_ZERO_COPY_MIN", v);
    }
  }
  num("SAN_LINGER_MS", 0, 600000, &c.linger_ms);
  if (const char* v = getenv_fn("SAN_SETUP")) {
    if (!strcmp(v, "late")) {
      c.late_setup = true;
    } else if (strcmp(v, "eager") != 0) {
      bad("SAN_SETUP", v);
    }
  }
  num("SAN_UPGRADE_DELAY_US", 0, 600000000, &c.upgrade_delay_us);
  num("SAN_UPGRADE_BYTES", 0, 1u << 30, &c.upgrade_bytes);
  num("SAN_UPGRADE_CALLS", 0, 1u << 30, &c.upgrade_calls);
  num("SAN_UPGRADE_TRY_MS", 1, 600000, &c.upgrade_try_ms);
  if (const char* v = getenv_fn("SAN_PEER_USERS")) {
    if (Result<PeerUsers> p = PeerUsers::Parse(v); p.ok()) {
      c.peer_users = std::move(p).value();
    } else {
      bad("SAN_PEER_USERS", v);
    }
  }
  if (const char* v = getenv_fn("SAN_LOG")) {
    if (!ParseLogLevel(v, &c.log_level)) bad("SAN_LOG", v);
  }
  if (const char* v = getenv_fn("SAN_LOG_FILE")) c.log_file = v;
  if (const char* v = getenv_fn("SAN_RULES")) c.rules = v;
  if (const char* v = getenv_fn("SAN_RULES_FILE")) c.rules_file = v;
  if (const char* v = getenv_fn("SAN_REPORT")) c.report = v;
  return c;
}

const Config& Config::Get() {
  static const Config config = [] {
    std::vector<std::string> errors;
    const ConfigFile file = ReadConfigFile(ConfigFilePath(SystemGetenv), &errors);
    Config c = ParseWithFile(SystemGetenv, file, &errors);
    for (const auto& e : errors) {
      const std::string line = "sanlib[" + std::to_string(getpid()) + "] warn: " + e + "\n";
      WriteLogLine(c.log_file, LogLevel::kWarn, line.data(), line.size());
    }
    return c;
  }();
  return config;
}

}  // namespace san
