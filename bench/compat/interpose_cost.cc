// interpose-cost: what the compatibility layer adds to calls on fds that are not SAN sockets.
// Times read() and write() on a pipe, poll() over two pipe ends and epoll_wait() on an epoll of
// kernel fds, each with a zero timeout, N times; prints ns per call. Run it plain and under
// `sanrun` (compat-bench does both and prints the difference): the layer's promise is that other
// fds pay only a table lookup (< 50 ns, issue 3).
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace {

double NsPerCall(long iterations, const std::function<void()>& call) {
  for (long i = 0; i < iterations / 10; ++i) call();  // warm up
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < iterations; ++i) call();
  const std::chrono::duration<double, std::nano> spent = std::chrono::steady_clock::now() - start;
  return spent.count() / static_cast<double>(iterations);
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1000000;
  int p[2];
  if (pipe(p) != 0) return 1;
  char byte = 'x';
  const double write_read = NsPerCall(n, [&] {
    if (write(p[1], &byte, 1) != 1 || read(p[0], &byte, 1) != 1) std::abort();
  });
  pollfd fds[2] = {{p[0], POLLIN, 0}, {p[1], POLLOUT, 0}};
  const double poll_ns = NsPerCall(n, [&] {
    if (poll(fds, 2, 0) < 0) std::abort();
  });
  const int ep = epoll_create1(0);
  epoll_event ev{EPOLLOUT, {}};
  epoll_ctl(ep, EPOLL_CTL_ADD, p[1], &ev);
  epoll_event out[4];
  const double epoll_ns = NsPerCall(n, [&] {
    if (epoll_wait(ep, out, 4, 0) < 0) std::abort();
  });
  std::printf("write+read(pipe) %.1f ns\npoll(2 pipe fds) %.1f ns\nepoll_wait(kernel fds) %.1f ns\n",
              write_read, poll_ns, epoll_ns);
  return 0;
}
