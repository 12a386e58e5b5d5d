#include "runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "sanlib/common/clock.h"
#include "shared/process_cpu.h"

namespace san::bench {
namespace {

void WriteLine(int fd, const std::string& line) {
  const std::string s = line + "\n";
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// One line from a pipe ("" at EOF before any byte).
std::string ReadLine(int fd) {
  std::string line;
  char c;
  for (;;) {
    const ssize_t n = read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || c == '\n') return line;
    line += c;
  }
}

// How often this process was preempted while it wanted to run: a pinned spinner that is preempted
// shares its CPU with other work, and its figures show it.
long InvoluntarySwitches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nivcsw;
}

// Everything a child does before its transport exists: die with the coordinator, pin, configure
// sanlib for the mode (before any san_* call), and take EPIPE as an error code, not a signal.
void PrepareChild(const RunSpec& spec, int cpu) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (cpu >= 0 && !PinToCpu(cpu)) perror("san-bench: sched_setaffinity");
  setenv("SAN_SPIN_US", SpinUsFor(spec.mode), 1);
  // The modes are fixed policies (busy-poll, sleep at once): no adapting to load in between.
  setenv("SAN_SPIN_ADAPT", "off", 1);
  signal(SIGPIPE, SIG_IGN);
}

int ServerMain(const RunSpec& spec, int address_fd) {
  PrepareChild(spec, spec.cpus.server);
  std::unique_ptr<Transport> transport = MakeTransport(spec.transport, spec.mode);
  Result<std::string> address = transport->Listen();
  if (!address.ok()) {
    fprintf(stderr, "san-bench: %s server: %s\n", spec.row_name.c_str(),
            address.status().ToString().c_str());
    return 1;
  }
  WriteLine(address_fd, address.value());
  close(address_fd);
  for (;;) {
    Result<bool> more = transport->Serve();
    if (!more.ok()) {
      fprintf(stderr, "san-bench: %s %s server: %s\n", spec.row_name.c_str(), ModeName(spec.mode),
              more.status().ToString().c_str());
      return 1;
    }
    if (!more.value()) return 0;
  }
}

// server: the server process, whose CPU the client reads from /proc beside its own.
int ClientMain(const RunSpec& spec, pid_t server, int address_fd, int result_fd) {
  PrepareChild(spec, spec.cpus.client);
  const std::string address = ReadLine(address_fd);
  close(address_fd);
  if (address.empty()) {
    WriteLine(result_fd, "error the server process could not listen");
    return 1;
  }
  std::unique_ptr<Transport> transport = MakeTransport(spec.transport, spec.mode);
  const CpuClock cpu = [server] { return SelfCpuSeconds() + ProcessCpuSeconds(server); };
  for (uint32_t size : spec.sizes) {
    const Setup setup{spec.kind, size, spec.nodelay};
    const long preempted_before = InvoluntarySwitches();
    Result<Row> row = MeasurePoint(*transport, address, setup, spec.schedule, cpu);
    if (!row.ok()) {
      WriteLine(result_fd, "error size " + std::to_string(size) + ": " + row.status().ToString());
      return 1;
    }
    char line[160];
    snprintf(line, sizeof line, "row %u %.9g %.9g %llu %ld %.9g", size, row->value, row->p99_us,
             static_cast<unsigned long long>(row->count), InvoluntarySwitches() - preempted_before,
             row->cpu_us);
    WriteLine(result_fd, line);
  }
  if (Status st = SendQuit(*transport, address); !st.ok()) {
    WriteLine(result_fd, "error quit: " + st.ToString());
    return 1;
  }
  return 0;
}

// waitpid with a deadline; returns the raw status, or -1 if the process is still running.
int WaitFor(pid_t pid, double seconds) {
  const uint64_t deadline = NowNs() + static_cast<uint64_t>(seconds * 1e9);
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return 0;
    if (NowNs() >= deadline) return -1;
    usleep(5000);
  }
}

void Kill(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

std::string ExitText(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "status " + std::to_string(status);
}

}  // namespace

const char* SpinUsFor(Mode mode) { return mode == Mode::kSpin ? "10000000" : "0"; }

RunOutcome RunPair(const RunSpec& spec) {
  RunOutcome out;
  const uint64_t start = NowNs();
  const std::string what = spec.row_name + " " + ModeName(spec.mode);
  int address_pipe[2], result_pipe[2];
  if (pipe2(address_pipe, O_CLOEXEC) != 0 || pipe2(result_pipe, O_CLOEXEC) != 0) {
    out.errors.push_back(what + ": pipe: " + strerror(errno));
    return out;
  }
  fflush(stdout);
  fflush(stderr);
  const pid_t server = fork();
  if (server == 0) {
    close(address_pipe[0]);
    close(result_pipe[0]);
    close(result_pipe[1]);
    exit(ServerMain(spec, address_pipe[1]));
  }
  const pid_t client = server < 0 ? -1 : fork();
  if (client == 0) {
    close(address_pipe[1]);
    close(result_pipe[0]);
    exit(ClientMain(spec, server, address_pipe[0], result_pipe[1]));
  }
  close(address_pipe[0]);
  close(address_pipe[1]);
  close(result_pipe[1]);
  if (server < 0 || client < 0) {
    out.errors.push_back(what + ": fork: " + strerror(errno));
    if (server > 0) Kill(server);
    close(result_pipe[0]);
    return out;
  }

  // Collect the client's lines, watching for progress.
  std::string pending;
  bool hung = false, client_reported_error = false;
  for (;;) {
    pollfd pfd{result_pipe[0], POLLIN, 0};
    const int r = poll(&pfd, 1, static_cast<int>(spec.stall_timeout_s * 1000));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      const size_t at = out.rows.size();
      out.errors.push_back(
          what + ": no progress for " + std::to_string(int(spec.stall_timeout_s)) + " s at size " +
          (at < spec.sizes.size() ? std::to_string(spec.sizes[at]) : "quit") + " (hung; killed)");
      hung = true;
      break;
    }
    char buf[4096];
    const ssize_t n = read(result_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    pending.append(buf, static_cast<size_t>(n));
    for (size_t eol; (eol = pending.find('\n')) != std::string::npos;) {
      const std::string line = pending.substr(0, eol);
      pending.erase(0, eol + 1);
      std::istringstream in(line);
      std::string tag;
      in >> tag;
      if (tag == "row") {
        Row row;
        row.transport = spec.row_name;
        row.kind = spec.kind;
        row.mode = spec.mode;
        unsigned long long count = 0, preemptions = 0;
        std::string value, p99, cpu;
        in >> row.size >> value >> p99 >> count >> preemptions >> cpu;
        row.cpu_us = cpu.empty() ? NAN : strtod(cpu.c_str(), nullptr);
        row.value = strtod(value.c_str(), nullptr);
        row.p99_us = strtod(p99.c_str(), nullptr);
        row.count = count;
        row.preemptions = preemptions;
        out.rows.push_back(row);
      } else {
        out.errors.push_back(what + ": " + line.substr(std::min(line.size(), tag.size() + 1)));
        client_reported_error = true;
      }
    }
  }
  close(result_pipe[0]);

  if (hung) {
    Kill(client);
    Kill(server);
  } else {
    int status = 0;
    while (waitpid(client, &status, 0) < 0 && errno == EINTR) {
    }
    const bool client_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!client_ok && !client_reported_error) {
      out.errors.push_back(what + ": client process " + ExitText(status));
    }
    // The server ends on the client's quit; after a failed client it may be waiting forever.
    const int server_status = WaitFor(server, client_ok ? 10.0 : 0.5);
    if (server_status == -1) {
      Kill(server);
      if (client_ok) out.errors.push_back(what + ": server process did not finish (killed)");
    } else if (!(WIFEXITED(server_status) && WEXITSTATUS(server_status) == 0)) {
      out.errors.push_back(what + ": server process " + ExitText(server_status) +
                           " (its message is above)");
    }
  }
  out.seconds = (NowNs() - start) / 1e9;
  return out;
}

}  // namespace san::bench
