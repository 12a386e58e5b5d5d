/* A chaos test of the late move (socket/late_upgrade.h), run under sanrun like any unmodified
 * program: a forked pair of processes shaped like gRPC -- nonblocking sockets, one thread asleep
 * in epoll_wait (edge-triggered) reading, another thread writing messages of random sizes with
 * sendmsg (several iovecs, partial writes, poll for POLLOUT) -- both directions at once, over
 * many connections, so each connection moves from kernel TCP to shm in the middle of traffic at
 * a different point. Every message carries its sequence number, length and checksum, and is
 * checked on arrival: a lost, repeated or altered byte anywhere fails the run, naming where.
 *
 *   late_stress CONNECTIONS BYTES_PER_DIRECTION SEED
 * Exit status 0: every message of every connection arrived intact, both ways; the last line says
 * how many connections ended on shm at each end ("moved=N/M"). 1: a check failed (the message on
 * stderr). 2: a system call failed. Every process arms alarm(120). Test-only. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "startup/san_mode.h"

enum { kHeaderBytes = 16, kMaxPayload = 300 * 1024 };
static const uint32_t kMagic = 0x5a17e55u;

__attribute__((noreturn)) static void die(const char* what) {
  fprintf(stderr, "late_stress %d: %s: %s\n", (int)getpid(), what, strerror(errno));
  exit(2);
}

__attribute__((noreturn)) static void fail(const char* fmt, unsigned long long a,
                                           unsigned long long b, unsigned long long c) {
  fprintf(stderr, "late_stress %d: ", (int)getpid());
  fprintf(stderr, fmt, a, b, c);
  fputc('\n', stderr);
  exit(1);
}

static uint64_t next_random(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *state = x;
}

/* The payload of message `seq` of a direction: its bytes follow from (seed, seq) alone. */
static void fill_payload(uint8_t* p, uint32_t len, uint64_t seed, uint32_t seq) {
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + seq + 1;
  for (uint32_t i = 0; i < len; ++i) {
    if ((i & 7) == 0) next_random(&state);
    p[i] = (uint8_t)(state >> ((i & 7) * 8));
  }
}

static uint32_t checksum(const uint8_t* p, uint32_t len) {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < len; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

struct side {
  int fd;
  uint64_t seed_out, seed_in;  /* what we send, what the peer sends */
  uint64_t bytes;              /* payload bytes to send one way */
};

static void put32(uint8_t* p, uint32_t v) { memcpy(p, &v, 4); }
static uint32_t get32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Writes every byte of the iovecs (nonblocking socket: poll for POLLOUT when it is full). */
static void send_all(int fd, struct iovec* iov, int cnt) {
  while (cnt > 0) {
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = iov;
    m.msg_iovlen = (size_t)cnt;
    const ssize_t n = sendmsg(fd, &m, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) die("sendmsg");
      struct pollfd p = {fd, POLLOUT, 0};
      if (poll(&p, 1, 15000) <= 0) die("poll(POLLOUT) for 15 s");
      continue;
    }
    size_t left = (size_t)n;
    while (cnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --cnt;
    }
    if (cnt > 0) {
      iov->iov_base = (uint8_t*)iov->iov_base + left;
      iov->iov_len -= left;
    }
  }
}

static void* writer(void* arg) {
  struct side* s = arg;
  uint8_t* payload = malloc(kMaxPayload);
  if (!payload) die("malloc");
  uint64_t rng = s->seed_out ^ 0xabcdefull;
  uint64_t left = s->bytes;
  uint32_t seq = 0;
  while (left > 0) {
    /* Mostly small and middling messages, now and then a large one (gRPC's mix). */
    const uint64_t r = next_random(&rng);
    uint32_t len = (r & 7) == 0 ? (uint32_t)(r >> 8) % kMaxPayload : (uint32_t)(r >> 8) % 2048;
    if (len > left) len = (uint32_t)left;
    fill_payload(payload, len, s->seed_out, seq);
    uint8_t header[kHeaderBytes];
    put32(header, kMagic);
    put32(header + 4, seq);
    put32(header + 8, len);
    put32(header + 12, checksum(payload, len));
    /* The header cut in two iovecs, as a framing layer's slices would be. */
    struct iovec iov[3] = {{header, 5}, {header + 5, kHeaderBytes - 5}, {payload, len}};
    send_all(s->fd, iov, len > 0 ? 3 : 2);
    left -= len;
    ++seq;
    if ((r & 0x3ff) == 0) usleep((useconds_t)(r >> 54));  /* now and then a pause, up to 1 ms */
  }
  if (shutdown(s->fd, SHUT_WR) != 0) die("shutdown(SHUT_WR)");
  free(payload);
  return NULL;
}

/* Reads until EOF with an edge-triggered epoll and recvmsg into two buffers; checks each
 * message as it completes (their sequence numbers prove that none is missing). */
static void read_and_check(struct side* s) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = s->fd};
  if (epoll_ctl(ep, EPOLL_CTL_ADD, s->fd, &ev) != 0) die("epoll_ctl");
  uint8_t* msg = malloc(kHeaderBytes + kMaxPayload);
  uint8_t* expect = malloc(kMaxPayload);
  if (!msg || !expect) die("malloc");
  size_t have = 0;       /* bytes of the current message so far */
  uint32_t seq = 0;
  uint64_t total = 0;
  for (;;) {
    const int n = epoll_wait(ep, &ev, 1, 10000);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("epoll_wait");
    if (n == 0) {
      /* What the socket holds now, to tell a missed event from a read that cannot go on. */
      int queued = -1;
      ioctl(s->fd, FIONREAD, &queued);
      struct pollfd p = {s->fd, POLLIN, 0};
      const int polled = poll(&p, 1, 0);
      char why[256];
      fprintf(stderr, "late_stress %d: stalled: FIONREAD %d, poll() %d revents %#x, mode %s (%s)\n",
              (int)getpid(), queued, polled, (unsigned)p.revents, san_mode_of(s->fd, why, sizeof why),
              why);
      fail("no event for 10 s after %llu bytes, message %llu (%llu bytes of it)", total, seq, have);
    }
    for (;;) {
      size_t want = kHeaderBytes;
      if (have >= kHeaderBytes) want = kHeaderBytes + get32(msg + 8);
      /* Exactly the rest of this message, in two pieces: reads end at message boundaries. */
      const size_t rest = want - have;
      struct iovec iov[2] = {{msg + have, rest / 2}, {msg + have + rest / 2, rest - rest / 2}};
      struct msghdr m;
      memset(&m, 0, sizeof m);
      m.msg_iov = iov;
      m.msg_iovlen = 2;
      const ssize_t got = recvmsg(s->fd, &m, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (got < 0) die("recvmsg");
      if (got == 0) {
        if (have != 0) fail("EOF inside message %llu (%llu of its bytes, %llu in all)", seq, have,
                            total);
        /* The peer sends s->bytes of payload: messages missing at the end show here. */
        if (total - (uint64_t)seq * kHeaderBytes != s->bytes)
          fail("EOF after %llu messages, %llu payload bytes of %llu", seq,
               total - (uint64_t)seq * kHeaderBytes, s->bytes);
        free(msg);
        free(expect);
        close(ep);
        return;
      }
      have += (size_t)got;
      total += (uint64_t)got;
      if (have == kHeaderBytes) {
        if (get32(msg) != kMagic) fail("message %llu: bad magic %llx at byte %llu", seq,
                                       get32(msg), total - kHeaderBytes);
        if (get32(msg + 4) != seq) fail("message %llu came as number %llu (byte %llu)", seq,
                                        get32(msg + 4), total - kHeaderBytes);
        if (get32(msg + 8) > kMaxPayload) fail("message %llu: length %llu (byte %llu)", seq,
                                               get32(msg + 8), total);
      }
      if (have >= kHeaderBytes && have == kHeaderBytes + get32(msg + 8)) {
        const uint32_t len = get32(msg + 8);
        fill_payload(expect, len, s->seed_in, seq);
        if (memcmp(expect, msg + kHeaderBytes, len) != 0 ||
            checksum(msg + kHeaderBytes, len) != get32(msg + 12)) {
          fail("message %llu (%llu bytes) altered, ending at byte %llu", seq, len, total);
        }
        ++seq;
        have = 0;
      }
    }
  }
}

/* One connection's end: a writer thread, this thread reading and checking until the peer's
 * EOF. Returns 1 if the socket ended on shm. */
static int run_side(int fd, uint64_t seed_out, uint64_t seed_in, uint64_t bytes) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int flags = 1;
  if (ioctl(fd, FIONBIO, &flags) != 0) die("FIONBIO");
  struct side s = {fd, seed_out, seed_in, bytes};
  pthread_t t;
  if (pthread_create(&t, NULL, writer, &s) != 0) die("pthread_create");
  read_and_check(&s);
  pthread_join(t, NULL);
  char why[256];
  const int shm = strcmp(san_mode_of(fd, why, sizeof why), "shm") == 0;
  close(fd);
  return shm;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: late_stress CONNECTIONS BYTES_PER_DIRECTION SEED\n");
    return 2;
  }
  const int connections = atoi(argv[1]);
  const uint64_t bytes = strtoull(argv[2], NULL, 10);
  const uint64_t seed = strtoull(argv[3], NULL, 10);
  alarm(120);
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) die("socket");
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  if (bind(listener, (struct sockaddr*)&a, sizeof a) != 0 || listen(listener, 16) != 0 ||
      getsockname(listener, (struct sockaddr*)&a, &alen) != 0) {
    die("listen");
  }
  const pid_t child = fork();
  if (child < 0) die("fork");
  if (child == 0) {
    close(listener);
    alarm(120);
    int moved = 0;
    for (int c = 0; c < connections; ++c) {
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0 || connect(fd, (struct sockaddr*)&a, sizeof a) != 0) die("connect");
      moved += run_side(fd, seed * 1000 + (uint64_t)c * 2 + 1, seed * 1000 + (uint64_t)c * 2,
                        bytes);
    }
    printf("client: connections=%d moved=%d/%d\n", connections, moved, connections);
    fflush(stdout);
    _exit(0);
  }
  int moved = 0;
  for (int c = 0; c < connections; ++c) {
    const int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) die("accept");
    moved += run_side(fd, seed * 1000 + (uint64_t)c * 2, seed * 1000 + (uint64_t)c * 2 + 1, bytes);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) die("waitpid");
  printf("server: connections=%d moved=%d/%d\n", connections, moved, connections);
  if (!WIFEXITED(status)) {
    fprintf(stderr, "late_stress: client died (status %d)\n", status);
    return 1;
  }
  return WEXITSTATUS(status);
}
