// verbs_socket_peer: one end of a SAN socket connection through the public C API (<san/san.h>),
// for verbs_socket_test and deploy/cluster/cluster_test.sh. A process per end, because
// SAN_PROVIDER is read once per process and peer death needs a process to kill.
//
//   server IP MODE BYTES [PORT]      listen on IP:PORT (default 0: any), print "port N", accept
//                                    one connection, check its mode, move BYTES each way at once
//                                    (checked), then expect EOF, close
//   client IP PORT MODE BYTES [WHY]  connect, check the mode (and that the fallback reason holds
//                                    WHY), BYTES each way at once, shutdown(SHUT_WR), expect EOF
//   hold IP MODE                     listen, print "port N", accept, check the mode, echo one
//                                    byte, print "held", then sleep until killed
//   forkserve IP MODE                as hold up to "held", then the classic forking server: fork,
//                                    the parent closes its copy, the child sends on the inherited
//                                    connection. Over verbs the child cannot use the parent's
//                                    queue pair (docs/verbs.md, "Fork"): its send must fail with
//                                    ECONNRESET, at once (exit 0 then; the child's result printed)
//   victim IP PORT MODE              connect, check the mode, one byte there and back, print
//                                    "connected", then block in recv: must fail with ECONNRESET
//   local IP MODE [WHY]              both ends in this process (listen, connect, accept): both
//                                    in MODE, the client's reason holds WHY, 64 KiB each way
//   sink IP MODE                     listen, print "port N", accept, check the mode, read and
//                                    drop everything, print "receiving" after 4 MiB, read on
//                                    until killed
//   source IP PORT MODE              connect, check the mode, send 1 MiB blocks until a send
//                                    fails: exit 0 if it failed with ECONNRESET or EPIPE
//
// Environment: SAN_TEST_SEND_BLOCK, the bytes per san_send in server/client (default 64 KiB;
// large ones take the zero-copy path over verbs when SAN_ZERO_COPY_MIN allows).
//
// MODE is what san_getinfo must say: verbs, shm or tcp. Every line of interest goes to stdout,
// flushed; exit 0 when every check passed, 1 otherwise (the reason on stderr). Every wait is
// bounded (SO_RCVTIMEO-like polls of 30 s), so a broken library fails instead of hanging.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "san/san.h"

namespace {

constexpr int kWaitMs = 30000;

[[noreturn]] void Fail(const char* what) {
  fprintf(stderr, "verbs_socket_peer: %s: %s\n", what, strerror(errno));
  exit(1);
}

uint8_t PatternByte(uint64_t i, uint32_t seed) {
  return static_cast<uint8_t>((i * 2654435761u + seed) >> 7);
}

const char* ModeName(int mode) {
  switch (mode) {
    case SAN_MODE_TCP:
      return "tcp";
    case SAN_MODE_SHM:
      return "shm";
    case SAN_MODE_VERBS:
      return "verbs";
    default:
      return "none";
  }
}

// Prints "<side> mode=M reason=R" and checks M (and that R holds `why`, when given).
bool CheckMode(int fd, const char* side, const std::string& want, const char* why) {
  san_info info;
  if (san_getinfo(fd, &info) != 0) Fail("san_getinfo");
  printf("%s mode=%s reason=%s\n", side, ModeName(info.mode), info.fallback);
  fflush(stdout);
  if (want != ModeName(info.mode)) {
    fprintf(stderr, "verbs_socket_peer: %s: mode %s, want %s\n", side, ModeName(info.mode),
            want.c_str());
    return false;
  }
  if (why != nullptr && strstr(info.fallback, why) == nullptr) {
    fprintf(stderr, "verbs_socket_peer: %s: reason '%s' lacks '%s'\n", side, info.fallback, why);
    return false;
  }
  return true;
}

sockaddr_in Address(const char* ip, uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
    fprintf(stderr, "verbs_socket_peer: bad address %s\n", ip);
    exit(2);
  }
  return sin;
}

void WaitFor(int fd, short events) {
  pollfd p{fd, events, 0};
  const int n = san_poll(&p, 1, kWaitMs);
  if (n < 0) Fail("san_poll");
  if (n == 0) {
    errno = ETIMEDOUT;
    Fail("waiting for the peer");
  }
}

int Listen(const char* ip, uint16_t* port) {
  const int fd = san_socket(AF_INET, SOCK_SAN, 0);
  if (fd < 0) Fail("san_socket");
  sockaddr_in sin = Address(ip, *port);
  socklen_t len = sizeof sin;
  const int on = 1;
  san_setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (san_bind(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) != 0) Fail("san_bind");
  if (san_listen(fd, 8) != 0) Fail("san_listen");
  if (san_getsockname(fd, reinterpret_cast<sockaddr*>(&sin), &len) != 0) Fail("san_getsockname");
  *port = ntohs(sin.sin_port);
  return fd;
}

int AcceptOne(int lfd) {
  WaitFor(lfd, POLLIN);
  const int fd = san_accept(lfd, nullptr, nullptr);
  if (fd < 0) Fail("san_accept");
  return fd;
}

int ConnectTo(const char* ip, uint16_t port) {
  const int fd = san_socket(AF_INET, SOCK_SAN, 0);
  if (fd < 0) Fail("san_socket");
  const sockaddr_in sin = Address(ip, port);
  if (san_connect(fd, reinterpret_cast<const sockaddr*>(&sin), sizeof sin) != 0) {
    Fail("san_connect");
  }
  return fd;
}

// Sends `bytes` of the pattern `seed` while receiving `bytes` of `peer_seed`, checking each byte.
bool BothWays(int fd, uint64_t bytes, uint32_t seed, uint32_t peer_seed, const char* side) {
  const auto start = std::chrono::steady_clock::now();
  bool send_ok = true;
  const char* block_env = getenv("SAN_TEST_SEND_BLOCK");
  const size_t block =
      block_env != nullptr ? std::max<size_t>(1, std::stoull(block_env)) : 64 << 10;
  std::thread sender([&] {
    std::vector<uint8_t> buf(block);
    for (uint64_t done = 0; done < bytes;) {
      const size_t n = std::min<uint64_t>(buf.size(), bytes - done);
      for (size_t i = 0; i < n; ++i) buf[i] = PatternByte(done + i, seed);
      size_t off = 0;
      while (off < n) {
        const ssize_t k = san_send(fd, buf.data() + off, n - off, MSG_NOSIGNAL);
        if (k <= 0) {
          fprintf(stderr, "verbs_socket_peer: %s: san_send: %s\n", side, strerror(errno));
          send_ok = false;
          return;
        }
        off += static_cast<size_t>(k);
      }
      done += n;
    }
  });
  std::vector<uint8_t> buf(64 << 10);
  uint64_t got = 0, bad = 0;
  while (got < bytes) {
    WaitFor(fd, POLLIN);
    const ssize_t k = san_recv(fd, buf.data(), std::min<uint64_t>(buf.size(), bytes - got), 0);
    if (k <= 0) {
      fprintf(stderr, "verbs_socket_peer: %s: san_recv after %llu bytes: %s\n", side,
              static_cast<unsigned long long>(got), k == 0 ? "EOF" : strerror(errno));
      break;
    }
    for (ssize_t i = 0; i < k; ++i) bad += buf[i] != PatternByte(got + i, peer_seed);
    got += static_cast<uint64_t>(k);
  }
  sender.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  printf("%s received=%llu mismatches=%llu (%.2f s, %.1f MB/s each way at once)\n", side,
         static_cast<unsigned long long>(got), static_cast<unsigned long long>(bad), s,
         s > 0 ? static_cast<double>(got) / s / 1e6 : 0.0);
  fflush(stdout);
  return send_ok && got == bytes && bad == 0;
}

bool ExpectEof(int fd, const char* side) {
  char c;
  WaitFor(fd, POLLIN);
  const ssize_t k = san_recv(fd, &c, 1, 0);
  if (k != 0) {
    fprintf(stderr, "verbs_socket_peer: %s: expected EOF, got %zd (%s)\n", side, k,
            k < 0 ? strerror(errno) : "data");
    return false;
  }
  printf("%s eof\n", side);
  fflush(stdout);
  return true;
}

void PrintPort(uint16_t port) {
  printf("port %u\n", port);
  fflush(stdout);
}

int Server(const char* ip, const std::string& mode, uint64_t bytes, uint16_t port) {
  const int lfd = Listen(ip, &port);
  PrintPort(port);
  const int fd = AcceptOne(lfd);
  bool ok = CheckMode(fd, "server", mode, nullptr);
  ok = BothWays(fd, bytes, 2, 1, "server") && ok;
  ok = ExpectEof(fd, "server") && ok;
  if (san_close(fd) != 0) Fail("san_close");
  san_close(lfd);
  return ok ? 0 : 1;
}

int Client(const char* ip, uint16_t port, const std::string& mode, uint64_t bytes,
           const char* why) {
  const int fd = ConnectTo(ip, port);
  bool ok = CheckMode(fd, "client", mode, why);
  ok = BothWays(fd, bytes, 1, 2, "client") && ok;
  if (san_shutdown(fd, SHUT_WR) != 0) Fail("san_shutdown");
  ok = ExpectEof(fd, "client") && ok;
  san_close(fd);
  return ok ? 0 : 1;
}

int Hold(const char* ip, const std::string& mode, bool fork_after) {
  uint16_t port = 0;
  const int lfd = Listen(ip, &port);
  PrintPort(port);
  const int fd = AcceptOne(lfd);
  if (!CheckMode(fd, "server", mode, nullptr)) return 1;
  char c;
  WaitFor(fd, POLLIN);
  if (san_recv(fd, &c, 1, 0) != 1 || san_send(fd, &c, 1, MSG_NOSIGNAL) != 1) Fail("echo");
  printf("held\n");
  fflush(stdout);
  if (!fork_after) {
    for (;;) pause();  // until the test kills us
  }
  const pid_t child = fork();
  if (child < 0) Fail("fork");
  if (child == 0) {
    const ssize_t k = san_send(fd, "y", 1, MSG_NOSIGNAL);
    const int err = errno;
    printf("child send=%zd errno=%s\n", k, k < 0 ? strerror(err) : "-");
    fflush(stdout);
    san_close(fd);
    // _exit: the parent's connection thread does not exist here, and LeakSanitizer would count
    // what it held (in the sanitizer build) as this child's leak.
    _exit(k < 0 && err == ECONNRESET ? 0 : 1);
  }
  san_close(fd);  // the parent's copy: the child holds the connection now
  int status = 0;
  if (waitpid(child, &status, 0) != child) Fail("waitpid");
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int Victim(const char* ip, uint16_t port, const std::string& mode) {
  const int fd = ConnectTo(ip, port);
  if (!CheckMode(fd, "client", mode, nullptr)) return 1;
  char c = 'x';
  if (san_send(fd, &c, 1, MSG_NOSIGNAL) != 1) Fail("san_send");
  WaitFor(fd, POLLIN);
  if (san_recv(fd, &c, 1, 0) != 1) Fail("san_recv (echo)");
  printf("connected\n");
  fflush(stdout);
  WaitFor(fd, POLLIN);  // the peer's death makes the socket readable
  const ssize_t k = san_recv(fd, &c, 1, 0);
  const int err = errno;
  printf("after peer death: recv=%zd errno=%s\n", k, k < 0 ? strerror(err) : "-");
  fflush(stdout);
  return k < 0 && err == ECONNRESET ? 0 : 1;
}

int Local(const char* ip, const std::string& mode, const char* why) {
  uint16_t port = 0;
  const int lfd = Listen(ip, &port);
  const int cfd = ConnectTo(ip, port);  // SAN set-up completes before accept (Sockets semantics)
  const int sfd = AcceptOne(lfd);
  bool ok = CheckMode(cfd, "client", mode, why);
  ok = CheckMode(sfd, "server", mode, nullptr) && ok;
  bool bytes_ok = true;
  std::vector<uint8_t> out(64 << 10), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = PatternByte(i, 7);
  for (const auto& [from, to] : {std::pair{cfd, sfd}, std::pair{sfd, cfd}}) {
    size_t sent = 0, got = 0;
    while (got < in.size()) {
      if (sent < out.size()) {
        const ssize_t k = san_send(from, out.data() + sent, out.size() - sent, MSG_DONTWAIT);
        if (k > 0) sent += static_cast<size_t>(k);
        if (k < 0 && errno != EAGAIN) Fail("san_send");
      }
      pollfd p{to, POLLIN, 0};
      if (san_poll(&p, 1, sent < out.size() ? 10 : kWaitMs) < 0) Fail("san_poll");
      if (p.revents == 0) continue;
      const ssize_t k = san_recv(to, in.data() + got, in.size() - got, 0);
      if (k <= 0) Fail("san_recv");
      got += static_cast<size_t>(k);
    }
    bytes_ok = bytes_ok && in == out;
  }
  printf("local bytes=%s\n", bytes_ok ? "ok" : "BAD");
  ok = ok && bytes_ok;
  san_close(cfd);
  san_close(sfd);
  san_close(lfd);
  return ok ? 0 : 1;
}

int Sink(const char* ip, const std::string& mode) {
  uint16_t port = 0;
  const int lfd = Listen(ip, &port);
  PrintPort(port);
  const int fd = AcceptOne(lfd);
  if (!CheckMode(fd, "server", mode, nullptr)) return 1;
  std::vector<uint8_t> buf(1 << 20);
  uint64_t got = 0;
  bool said = false;
  for (;;) {
    WaitFor(fd, POLLIN);
    const ssize_t k = san_recv(fd, buf.data(), buf.size(), 0);
    if (k <= 0) Fail("san_recv (sink)");
    got += static_cast<uint64_t>(k);
    if (!said && got >= (4u << 20)) {
      printf("receiving\n");
      fflush(stdout);
      said = true;
    }
  }
}

int Source(const char* ip, uint16_t port, const std::string& mode) {
  const int fd = ConnectTo(ip, port);
  if (!CheckMode(fd, "client", mode, nullptr)) return 1;
  std::vector<uint8_t> buf(1 << 20, 0x33);
  uint64_t sent = 0;
  for (;;) {
    const ssize_t k = san_send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
    if (k < 0) {
      const int err = errno;
      printf("source send failed after %llu bytes errno=%s\n",
             static_cast<unsigned long long>(sent), strerror(err));
      fflush(stdout);
      san_close(fd);
      return err == ECONNRESET || err == EPIPE ? 0 : 1;
    }
    sent += static_cast<uint64_t>(k);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  if (role == "server" && (argc == 5 || argc == 6)) {
    return Server(argv[2], argv[3], std::stoull(argv[4]),
                  argc == 6 ? static_cast<uint16_t>(std::stoi(argv[5])) : 0);
  }
  if (role == "client" && (argc == 6 || argc == 7)) {
    return Client(argv[2], static_cast<uint16_t>(std::stoi(argv[3])), argv[4], std::stoull(argv[5]),
                  argc == 7 ? argv[6] : nullptr);
  }
  if (role == "hold" && argc == 4) return Hold(argv[2], argv[3], false);
  if (role == "forkserve" && argc == 4) return Hold(argv[2], argv[3], true);
  if (role == "victim" && argc == 5) {
    return Victim(argv[2], static_cast<uint16_t>(std::stoi(argv[3])), argv[4]);
  }
  if (role == "sink" && argc == 4) return Sink(argv[2], argv[3]);
  if (role == "source" && argc == 5) {
    return Source(argv[2], static_cast<uint16_t>(std::stoi(argv[3])), argv[4]);
  }
  if (role == "local" && (argc == 4 || argc == 5)) {
    return Local(argv[2], argv[3], argc == 5 ? argv[4] : nullptr);
  }
  fprintf(stderr,
          "usage: %s server IP MODE BYTES [PORT] | client IP PORT MODE BYTES [WHY] |\n"
          "       hold IP MODE | forkserve IP MODE | victim IP PORT MODE | local IP MODE [WHY] |\n"
          "       sink IP MODE | source IP PORT MODE\n"
          "       (MODE: verbs, shm or tcp)\n",
          argv[0]);
  return 2;
}
