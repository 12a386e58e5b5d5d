// fork-cost: what running under `sanrun` adds to starting processes. Times N iterations of one
// operation and prints one line of key=value figures (bench/report's "process cost" section runs it
// plain and under sanrun, interleaved):
//   fork   fork(), the child _exit(0)s at once, waitpid(): the parent's share of a fork-per-task
//          program (a shell, make, a forking server)
//   exec   fork(), the child execs /bin/true, waitpid(): what a new program image costs, sanlib's
//          library loaded into it under sanrun (LD_PRELOAD is inherited)
// --listen first opens a TCP listener on 127.0.0.1 (under sanrun a SAN listener: the process then
// holds sanlib's state, threads and fds, which every fork copies).
// Prints: op, iterations, us (wall per iteration), cpu_us (user+system of the parent and its
// children per iteration), and how it ran: preload=yes|no (sanlib's calls are in the process),
// listener=san|kernel|none (san_is_socket on the listener), ld_preload_child=yes|no (exec: the
// children get sanlib's library too). Exit status 1 when an iteration fails.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

double CpuSeconds(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double ProcessCpuSeconds() { return CpuSeconds(RUSAGE_SELF) + CpuSeconds(RUSAGE_CHILDREN); }

int OpenListener() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 16) != 0) {
    perror("fork-cost: listener");
    std::exit(1);
  }
  return fd;
}

// One iteration: true when the child ran and exited 0.
bool Iterate(bool exec) {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    if (exec) {
      char* const argv[] = {const_cast<char*>("true"), nullptr};
      execv("/bin/true", argv);
    }
    _exit(exec ? 127 : 0);
  }
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int Usage() {
  fprintf(stderr, "usage: fork-cost fork|exec [--listen] [--iterations N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string op = argv[1];
  if (op != "fork" && op != "exec") return Usage();
  bool listen_first = false;
  long iterations = 2000;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--listen") == 0) {
      listen_first = true;
    } else if (std::strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
      iterations = std::atol(argv[++i]);
    } else {
      return Usage();
    }
  }
  if (iterations <= 0) return Usage();
  // sanlib's public call, present only when its library is in the process.
  using IsSocket = int (*)(int);
  const auto is_san = reinterpret_cast<IsSocket>(dlsym(RTLD_DEFAULT, "san_is_socket"));
  const char* listener = "none";
  if (listen_first) listener = is_san != nullptr && is_san(OpenListener()) == 1 ? "san" : "kernel";
  const char* preload = getenv("LD_PRELOAD");
  const bool child_preload =
      preload != nullptr && std::strstr(preload, "libsan_preload") != nullptr;
  for (long i = 0; i < iterations / 20; ++i) {  // warm up: the first forks fault pages in
    if (!Iterate(op == "exec")) return 1;
  }
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i) {
    if (!Iterate(op == "exec")) {
      fprintf(stderr, "fork-cost: iteration %ld failed\n", i);
      return 1;
    }
  }
  const std::chrono::duration<double, std::micro> wall = std::chrono::steady_clock::now() - t0;
  const double cpu_us = (ProcessCpuSeconds() - cpu0) * 1e6;
  printf("op=%s iterations=%ld us=%.2f cpu_us=%.2f preload=%s listener=%s ld_preload_child=%s\n",
         op.c_str(), iterations, wall.count() / static_cast<double>(iterations),
         cpu_us / static_cast<double>(iterations), is_san != nullptr ? "yes" : "no", listener,
         child_preload ? "yes" : "no");
  return 0;
}
