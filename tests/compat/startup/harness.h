// Test support for the start-up pattern suite (startup_patterns_test.cc): the lines the pattern
// programs print (client exchanges, "served" and "accept" records, exchange.h and common.h), and
// the clean-up of servers that left the test's process group (daemons that forked, exited and
// called setsid). The test process becomes a child subreaper, so every orphaned descendant is
// re-parented to it and can be stopped and reaped here. Test-only; single-threaded use.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/inet.h"

namespace san::testing_support {

// key=value words of one line; "fallback=" takes the rest of the line (a reason has spaces).
struct Record {
  std::string text;
  std::map<std::string, std::string> fields;
  const std::string& operator[](const std::string& key) const {
    static const std::string kNone;
    auto it = fields.find(key);
    return it == fields.end() ? kNone : it->second;
  }
};

inline Record ParseRecord(const std::string& line) {
  Record r{line, {}};
  std::string head = line, fallback;
  const size_t at = line.find("fallback=");
  if (at != std::string::npos) {
    head = line.substr(0, at);
    fallback = line.substr(at + 9);
    r.fields["fallback"] = fallback;
  }
  std::istringstream words(head);
  std::string word;
  while (words >> word) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos) r.fields[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return r;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Every line of `text` that starts with `prefix`, parsed.
inline std::vector<Record> RecordsOf(const std::string& text, const std::string& prefix) {
  std::vector<Record> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) == 0) out.push_back(ParseRecord(line.substr(prefix.size())));
  }
  return out;
}

// The last `max` characters of a log, for failure messages.
inline std::string Tail(const std::string& text, size_t max = 1500) {
  return text.size() <= max ? text : "..." + text.substr(text.size() - max);
}

// A loopback port free now, below the ephemeral range (32768 up by default): program.h's
// FreePort takes one from the kernel's ephemeral range, which a host full of TIME_WAIT sockets
// (a churn benchmark next door) can exhaust (port 0) or hand to someone's connect() before our
// server binds it. 0 if none was found.
inline uint16_t QuietPort() {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 32000);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<uint16_t>(pick(rng));
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    sockaddr_in a = Loopback(port);
    const bool free = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (free) return port;
  }
  return 0;
}

// How many sockets listen on TCP `port` now (/proc/net/tcp; an SO_REUSEPORT group has several).
inline int ListenerCount(uint16_t port) {
  char want[8];
  snprintf(want, sizeof want, ":%04X", port);
  int count = 0;
  std::ifstream in("/proc/net/tcp");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() > 5 && local.substr(local.size() - 5) == want) ++count;
  }
  return count;
}

// Polls `done` every 20 ms for up to timeout_ms.
template <typename Done>
bool WaitFor(Done done, int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The session id of a process (/proc/PID/stat field 6), -1 if it is gone.
inline pid_t SessionOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  long ppid = 0, pgrp = 0, session = -1;
  rest >> state >> ppid >> pgrp >> session;
  return static_cast<pid_t>(session);
}

// True once `pid` (a child of ours, directly or as subreaper) has exited; it is reaped then.
inline bool WaitGone(pid_t pid, int timeout_ms) {
  return WaitFor(
      [pid] {
        const pid_t r = waitpid(pid, nullptr, WNOHANG);
        return r == pid || (r < 0 && kill(pid, 0) != 0);
      },
      timeout_ms);
}

// Stops, at destruction, every process a test's servers left behind: the pids they recorded in
// DIR/pids, the whole session of each daemon whose pid file is registered (nginx and redis call
// setsid), then reaps what was re-parented to us.
class Reaper {
 public:
  explicit Reaper(std::string dir) : dir_(std::move(dir)) {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
  }
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;
  ~Reaper() {
    std::vector<pid_t> pids;
    std::istringstream recorded(ReadAll(dir_ + "/pids"));
    for (pid_t pid; recorded >> pid;) pids.push_back(pid);
    for (const std::string& file : session_pid_files_) {
      const pid_t leader = static_cast<pid_t>(std::atol(ReadAll(file).c_str()));
      if (leader <= 1) continue;
      for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
        const std::string name = entry.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        const pid_t pid = static_cast<pid_t>(std::stol(name));
        if (SessionOf(pid) == leader) pids.push_back(pid);
      }
    }
    for (pid_t pid : pids) {
      if (pid > 1 && pid != getpid()) kill(pid, SIGKILL);
    }
    // Reap whatever was re-parented to us (the test's own Program children are gone by now).
    WaitFor([] { return waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD; }, 2000);
  }

  // A pid file (written by the daemon) naming a session leader to stop with its session.
  void AddSessionPidFile(const std::string& path) { session_pid_files_.push_back(path); }

 private:
  std::string dir_;
  std::vector<std::string> session_pid_files_;
};

}  // namespace san::testing_support
