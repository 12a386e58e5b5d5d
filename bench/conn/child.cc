// conn-bench: fork, pipes and bounded waits (child.h).
#include "child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "proc_stats.h"

namespace san::connbench {
namespace {

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace

Child Spawn(const std::function<int(int, int)>& body) {
  int up[2], down[2];
  Child child;
  if (pipe2(up, O_CLOEXEC) != 0) return child;
  if (pipe2(down, O_CLOEXEC) != 0) {
    close(up[0]);
    close(up[1]);
    return child;
  }
  fflush(nullptr);
  child.pid = fork();
  if (child.pid == 0) {
    close(up[0]);
    close(down[1]);
    _exit(body(up[1], down[0]));
  }
  close(up[1]);
  close(down[0]);
  child.from_child = up[0];
  child.to_child = down[1];
  if (child.pid < 0) {
    CloseFd(&child.from_child);
    CloseFd(&child.to_child);
  }
  return child;
}

bool ReadWithin(int fd, void* buf, size_t len, int timeout_ms) {
  const double deadline = NowMs() + timeout_ms;
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    const double left = deadline - NowMs();
    if (left <= 0) return false;
    pollfd pfd = {fd, POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left) + 1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    const ssize_t n = read(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

Ending Reap(Child* child, int timeout_ms) {
  Ending ending;
  if (child->pid <= 0) {
    ending.how = "not started";
    return ending;
  }
  const double deadline = NowMs() + timeout_ms;
  int status = 0;
  rusage usage{};
  pid_t done = 0;
  while ((done = wait4(child->pid, &status, WNOHANG, &usage)) == 0 && NowMs() < deadline) {
    usleep(2000);
  }
  if (done == 0) {
    kill(child->pid, SIGKILL);
    done = wait4(child->pid, &status, 0, &usage);
    ending.hung = true;
    // A caller that gave up already reaps at once: the child was still running then.
    ending.how = timeout_ms < 1000
                     ? std::string("still running, killed")
                     : "hung: killed after " + std::to_string(timeout_ms / 1000) + " s";
  } else if (WIFEXITED(status)) {
    ending.clean = WEXITSTATUS(status) == 0;
    ending.how = "exit " + std::to_string(WEXITSTATUS(status));
  } else if (WIFSIGNALED(status)) {
    ending.how = std::string("signal ") + strsignal(WTERMSIG(status));
  }
  if (done > 0) ending.cpu_us = CpuMicros(usage);
  CloseFd(&child->from_child);
  CloseFd(&child->to_child);
  child->pid = -1;
  return ending;
}

void SetText(char* dst, size_t size, const std::string& text) {
  if (size == 0) return;
  const size_t n = text.size() < size - 1 ? text.size() : size - 1;
  memcpy(dst, text.data(), n);
  dst[n] = '\0';
}

}  // namespace san::connbench
