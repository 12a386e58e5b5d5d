#include "ftpd/server/config.h"

#include "ftp/protocol/command.h"

#include <boost/program_options.hpp>
#include <fstream>
#include <sstream>

namespace san::ftp {

namespace po = boost::program_options;

bool ParseConfig(int argc, char** argv, Config* c, std::string* error, std::string* help_text) {
  std::string config_file;
  po::options_description opts("ftpd options (config file: the same names as key = value)");
  opts.add_options()("help,h", "show this help")("config,c", po::value(&config_file),
                                                 "configuration file")(
      "daemon,D", po::bool_switch(&c->daemon), "standalone daemon (default: inetd mode, fd 0)")(
      "session", po::bool_switch(&c->session),
      "serve the connection on fd 0 (set by -D for its sessions)")(
      "listen-address", po::value(&c->listen_address)->default_value(c->listen_address),
      "standalone: address to listen on")("port,p", po::value(&c->port)->default_value(c->port),
                                          "standalone: port (0 = any, see --port-file)")(
      "port-file", po::value(&c->port_file), "standalone: write the bound port to this file")(
      "max-clients", po::value(&c->max_clients)->default_value(c->max_clients),
      "standalone: concurrent sessions")("max-per-ip",
                                         po::value(&c->max_per_ip)->default_value(c->max_per_ip),
                                         "standalone: concurrent sessions per client address")(
      "users-file", po::value(&c->users_file),
      "local accounts: name:crypt-hash:root[:rw|ro] lines")(
      "anonymous", po::value(&c->anonymous)->default_value(c->anonymous),
      "allow anonymous read-only logins")("anon-root", po::value(&c->anon_root),
                                          "root directory of anonymous sessions")(
      "idle-timeout", po::value(&c->idle_timeout_s)->default_value(c->idle_timeout_s),
      "seconds without a command before 421")(
      "data-timeout", po::value(&c->data_timeout_s)->default_value(c->data_timeout_s),
      "seconds a data connection may stall")(
      "max-login-failures", po::value(&c->max_login_failures)->default_value(c->max_login_failures),
      "failed logins before the connection is closed")(
      "login-fail-delay-ms",
      po::value(&c->login_fail_delay_ms)->default_value(c->login_fail_delay_ms),
      "delay after each failed login")("max-line",
                                       po::value(&c->max_line)->default_value(c->max_line),
                                       "longest command line accepted")(
      "xferlog", po::value(&c->xferlog), "transfer log (xferlog format)")(
      "banner", po::value(&c->banner)->default_value(c->banner), "220 greeting text")(
      "run-as", po::value(&c->run_as), "after login, sessions switch to this user (needs root)")(
      "chroot", po::value(&c->chroot)->default_value(c->chroot),
      "chroot sessions into their root after login: auto (when root), yes, no")(
      "san-upgrade", po::value(&c->san_upgrade)->default_value(c->san_upgrade),
      "offer AUTH SAN (control connection upgrade)")(
      "hash-password", po::bool_switch(&c->hash_password),
      "read a password from stdin, print its crypt(3) hash");
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, opts), vm);
    if (vm.count("config")) {
      std::ifstream in(vm["config"].as<std::string>());
      if (!in) {
        *error = "cannot read config file " + vm["config"].as<std::string>();
        return false;
      }
      po::store(po::parse_config_file(in, opts), vm);
    }
    po::notify(vm);
    if (vm.count("help")) {
      std::ostringstream s;
      s << "usage: ftpd [-D] [options]\n" << opts;
      *help_text = s.str();
      c->show_help = true;
    }
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
  if (c->port < 0 || c->port > 65535) {
    *error = "port out of range";
    return false;
  }
  if (c->max_line < 64 || c->max_line > static_cast<int>(kMaxCommandLine)) {
    *error = "max-line must be within 64.." + std::to_string(kMaxCommandLine);
    return false;
  }
  if (c->chroot != "auto" && c->chroot != "yes" && c->chroot != "no") {
    *error = "chroot must be auto, yes or no";
    return false;
  }
  if (c->anonymous && c->anon_root.empty()) {
    *error = "anonymous logins need anon-root";
    return false;
  }
  return true;
}

}  // namespace san::ftp
