#include "support/child.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>

#include "support/process.h"

namespace san::testing_support {

void Child::Start(const std::function<int()>& body, unsigned alarm_s) {
  std::fflush(nullptr);  // no duplicated stdio buffers in the child
  pid_ = fork();
  if (pid_ == 0) {
    alarm(alarm_s);
    _exit(body());
  }
}

int Child::Wait(int timeout_ms) {
  if (pid_ <= 0) return status_;
  status_ = WaitOrKill(pid_, timeout_ms, false);
  pid_ = -1;
  return status_;
}

bool Child::Exited() {
  if (pid_ <= 0) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  status_ = status;
  pid_ = -1;
  return true;
}

int Child::Code(int status) { return ExitCode(status); }

void Child::Kill() {
  if (pid_ <= 0) return;
  status_ = KillAndReap(pid_, false);
  pid_ = -1;
}

Channel::Channel() {
  if (pipe2(fds_, O_CLOEXEC) != 0) fds_[0] = fds_[1] = -1;
}

Channel::~Channel() {
  if (fds_[0] >= 0) close(fds_[0]);
  if (fds_[1] >= 0) close(fds_[1]);
}

bool Channel::Write(const void* data, size_t len) {
  return write(fds_[1], data, len) == static_cast<ssize_t>(len);
}

bool Channel::Read(void* data, size_t len, int timeout_ms) {
  auto* p = static_cast<char*>(data);
  size_t got = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (got < len) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          end - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    pollfd pfd{fds_[0], POLLIN, 0};
    const int rc = poll(&pfd, 1, static_cast<int>(left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) return false;
    const ssize_t n = read(fds_[0], p + got, len - got);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace san::testing_support
