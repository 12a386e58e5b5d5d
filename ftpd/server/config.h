// ftpd's configuration: command-line flags and a config file (key = value, the same names as the
// long flags), parsed with Boost.Program_options. Flags win over the file.
//
// Parse never throws: Boost's exceptions stop here and become an error text for the caller.
// Thread-safety: an immutable value after ParseConfig.
#pragma once

#include <string>

namespace san::ftp {

struct Config {
  // Mode.
  bool daemon = false;        // -D: standalone; otherwise inetd (control connection on fd 0)
  std::string listen_address = "0.0.0.0";
  int port = 21;
  int max_clients = 50;
  int max_per_ip = 5;
  bool session = false;       // --session: serve fd 0 (how -D runs each session; as inetd mode)
  std::string port_file;      // standalone: write the bound port here (tests, port 0)
  // Accounts.
  std::string users_file;
  bool anonymous = false;     // anonymous (ftp/anonymous) read-only logins
  std::string anon_root;
  // Limits.
  int idle_timeout_s = 300;
  int data_timeout_s = 60;
  int max_login_failures = 3;
  int login_fail_delay_ms = 1000;
  int max_line = 4096 + 16;
  // Logging.
  std::string xferlog;        // xferlog(5) path; "" = none
  std::string banner = "ftpd (sanlib) ready.";
  std::string run_as;         // after login, sessions drop root to this user ("" = keep uid)
  // chroot(2) into the session's root after login: "auto" (when running as root), "yes" (a
  // session that cannot chroot is refused), "no" (openat2 confinement only).
  std::string chroot = "auto";
  bool san_upgrade = true;    // offer AUTH SAN (control connection upgrade) in FEAT
  // Other actions instead of serving.
  bool hash_password = false; // read a password on stdin, print its crypt(3) hash
  bool show_help = false;
};

// On failure returns false and sets *error; on --help fills *help_text and sets show_help.
bool ParseConfig(int argc, char** argv, Config* config, std::string* error, std::string* help_text);

}  // namespace san::ftp
