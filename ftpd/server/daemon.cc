#include "ftpd/server/daemon.h"

#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "ftp/protocol/address.h"
#include "ftp/protocol/reply.h"
#include "sanlib/common/unique_fd.h"

namespace san::ftp {
namespace {

volatile sig_atomic_t g_stop = 0;
void OnStop(int) { g_stop = 1; }

std::optional<HostPort> ListenAddress(const Config& c) {
  HostPort hp;
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(c.port));
  if (inet_pton(AF_INET, c.listen_address.c_str(), &sin.sin_addr) == 1) {
    return MakeHostPort(reinterpret_cast<sockaddr*>(&sin), sizeof sin);
  }
  sockaddr_in6 sin6{};
  sin6.sin6_family = AF_INET6;
  sin6.sin6_port = htons(static_cast<uint16_t>(c.port));
  if (inet_pton(AF_INET6, c.listen_address.c_str(), &sin6.sin6_addr) == 1) {
    return MakeHostPort(reinterpret_cast<sockaddr*>(&sin6), sizeof sin6);
  }
  return std::nullopt;
}

}  // namespace

int RunDaemon(const Config& config, char* const* session_argv) {
  std::optional<HostPort> addr = ListenAddress(config);
  if (!addr) {
    fprintf(stderr, "ftpd: bad listen address %s\n", config.listen_address.c_str());
    return 2;
  }
  // A kernel listener: the daemon itself moves no data, and its children exec a fresh ftpd.
  UniqueFd listener(socket(addr->family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int one = 1;
  if (!listener.valid() ||
      setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr->addr), addr->len) != 0 ||
      listen(listener.get(), 64) != 0) {
    fprintf(stderr, "ftpd: listen on %s port %d: %s\n", config.listen_address.c_str(), config.port,
            strerror(errno));
    return 1;
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const uint16_t port = MakeHostPort(reinterpret_cast<sockaddr*>(&bound), bound_len).port();
  if (!config.port_file.empty()) {
    // Write then rename, so a reader never sees a half-written number.
    const std::string tmp = config.port_file + ".tmp";
    { std::ofstream(tmp) << port << "\n"; }
    rename(tmp.c_str(), config.port_file.c_str());
  }
  fprintf(stderr, "ftpd: listening on %s port %u\n", addr->host().c_str(), port);
  struct sigaction sa {};
  sa.sa_handler = OnStop;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  std::map<pid_t, std::string> sessions;  // pid -> client address
  while (!g_stop) {
    for (pid_t pid; (pid = waitpid(-1, nullptr, WNOHANG)) > 0;) sessions.erase(pid);
    pollfd p{listener.get(), POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;  // timeout or a signal: re-check g_stop and reap
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    UniqueFd conn(accept4(listener.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    const std::string host = MakeHostPort(reinterpret_cast<sockaddr*>(&ss), len).host();
    int same_ip = 0;
    for (const auto& [pid, h] : sessions) same_ip += h == host;
    const char* refuse = nullptr;
    if (static_cast<int>(sessions.size()) >= config.max_clients) {
      refuse = "Too many users, try again later.";
    } else if (same_ip >= config.max_per_ip) {
      refuse = "Too many connections from your address.";
    }
    if (refuse) {
      const std::string reply = FormatReply(421, refuse);
      ssize_t ignored = send(conn.get(), reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)ignored;
      continue;
    }
    const pid_t pid = fork();
    if (pid == 0) {
      // Only async-signal-safe calls until exec: the session starts as a fresh image on fd 0,
      // exactly as under inetd.
      if (dup2(conn.get(), 0) < 0) _exit(127);
      execv("/proc/self/exe", session_argv);
      _exit(127);
    }
    if (pid < 0) {
      const std::string reply = FormatReply(421, "Server busy (fork failed).");
      ssize_t ignored = send(conn.get(), reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)ignored;
      continue;
    }
    sessions[pid] = host;
  }
  for (const auto& [pid, h] : sessions) kill(pid, SIGTERM);
  for (const auto& [pid, h] : sessions) waitpid(pid, nullptr, 0);
  return 0;
}

}  // namespace san::ftp
