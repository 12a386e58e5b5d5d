/* The client side of the start-up pattern suite: one connection's exchange with an echo server,
 * and the line the test parses. An exchange connects to 127.0.0.1:port, sends 64 KiB of a
 * pattern in 4 KiB chunks (each echoed back before the next), then a ping-pong of 50 small
 * messages about 6 ms apart (the connection lives ~300 ms), then reads its SAN mode -- at the end,
 * and if it is not shm yet, again while pinging for up to 1 s -- then shuts down writing and
 * expects a clean EOF. Every wait is bounded (3 s per step; exchange_watchdog() reports the step
 * of every unfinished exchange and exits if the whole run overstays). Test-only. */
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "san_mode.h"

enum { kExchangeBulk = 64 * 1024, kExchangeChunk = 4096, kExchangePings = 50, kExchangeStepMs = 3000 };
/* Errors of our own, beside errno values. */
enum { kErrEof = -1, kErrTimeout = -2, kErrCorrupt = -3, kErrExtraBytes = -4 };

struct exchange_result {
  const char* volatile step; /* where it is (or failed); "done" once finished */
  volatile int finished; /* its line is out (set by the caller) */
  int ok;
  int err;
  unsigned port; /* the client's local port: the server logs it as peer_port */
  size_t bytes;  /* bytes echoed back intact */
  char mode[16];
  char why[96];
};

static inline const char* exchange_error_name(int err) {
  switch (err) {
    case 0: return "-";
    case kErrEof: return "early-EOF";
    case kErrTimeout: return "timeout(no-progress-3s)";
    case kErrCorrupt: return "corrupt-echo";
    case kErrExtraBytes: return "bytes-after-echo";
    default: return strerrorname_np(err) ? strerrorname_np(err) : "errno?";
  }
}

static inline uint8_t exchange_byte(size_t i, unsigned seed) {
  return (uint8_t)(i * 7 + (i >> 11) + seed * 13);
}

/* 0 when fd is ready for `events` within the step's bound; else -1 with errno (kErrTimeout). */
static inline int exchange_wait(int fd, short events) {
  struct pollfd p = {fd, events, 0};
  for (;;) {
    const int r = poll(&p, 1, kExchangeStepMs);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) {
      errno = kErrTimeout;
      return -1;
    }
    return 0;
  }
}

static inline int exchange_send(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    if (exchange_wait(fd, POLLOUT) != 0) return -1;
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k < 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static inline int exchange_recv(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    if (exchange_wait(fd, POLLIN) != 0) return -1;
    const ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k < 0) return -1;
    if (k == 0) {
      errno = kErrEof;
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Sends `n` bytes of the pattern from offset `at` and checks they come back. */
static inline int exchange_echo(int fd, size_t at, size_t n, unsigned seed) {
  uint8_t out[kExchangeChunk], in[kExchangeChunk];
  for (size_t i = 0; i < n; ++i) out[i] = exchange_byte(at + i, seed);
  if (exchange_send(fd, out, n) != 0 || exchange_recv(fd, in, n) != 0) return -1;
  if (memcmp(out, in, n) != 0) {
    errno = kErrCorrupt;
    return -1;
  }
  return 0;
}

static inline double exchange_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline void exchange_run(uint16_t port, unsigned seed, struct exchange_result* r) {
  char why[96] = "";
  r->step = "socket";
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) goto failed;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  r->step = "connect";
  if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) goto failed;
  socklen_t len = sizeof a;
  if (getsockname(fd, (struct sockaddr*)&a, &len) == 0) r->port = ntohs(a.sin_port);
  r->step = "bulk-echo";
  for (size_t at = 0; at < kExchangeBulk; at += kExchangeChunk) {
    if (exchange_echo(fd, at, kExchangeChunk, seed) != 0) goto failed;
    r->bytes += kExchangeChunk;
  }
  r->step = "ping-pong";
  for (int i = 0; i < kExchangePings; ++i) {
    if (exchange_echo(fd, (size_t)i * 32, 32, seed + 1) != 0) goto failed;
    r->bytes += 32;
    usleep(6000);
  }
  r->step = "mode";
  const char* mode = san_mode_of(fd, why, sizeof why);
  const double until = exchange_now() + 1.0;
  while (san_mode_available() && strcmp(mode, "shm") != 0 && exchange_now() < until) {
    if (exchange_echo(fd, 0, 1, seed) != 0) goto failed;
    r->bytes += 1;
    usleep(20000);
    mode = san_mode_of(fd, why, sizeof why);
  }
  snprintf(r->mode, sizeof r->mode, "%s", mode);
  snprintf(r->why, sizeof r->why, "%s", why);
  r->step = "shutdown-eof";
  if (shutdown(fd, SHUT_WR) != 0) goto failed;
  uint8_t extra;
  if (exchange_wait(fd, POLLIN) != 0) goto failed;
  const ssize_t k = recv(fd, &extra, 1, 0);
  if (k < 0) goto failed;
  if (k > 0) {
    errno = kErrExtraBytes;
    goto failed;
  }
  close(fd);
  r->ok = 1;
  r->step = "done";
  return;
failed:
  r->err = errno;
  if (r->mode[0] == '\0') snprintf(r->mode, sizeof r->mode, "%s", fd >= 0 ? san_mode_of(fd, why, sizeof why) : "none");
  if (r->why[0] == '\0') snprintf(r->why, sizeof r->why, "%s", why);
  if (fd >= 0) close(fd);
}

/* Writes the line the test parses ("fallback=" last: the reason has spaces) in one write(), then
 * marks the exchange finished for the watchdog. */
static inline void exchange_report(const char* prefix, int index, struct exchange_result* r) {
  char line[512];
  snprintf(line, sizeof line, "%sconn=%d port=%u result=%s step=%s error=%s bytes=%zu mode=%s fallback=%s\n",
           prefix, index, r->port, r->ok ? "ok" : "fail", r->step, r->ok ? "-" : exchange_error_name(r->err),
           r->bytes, r->mode[0] ? r->mode : "none", r->why);
  if (write(STDOUT_FILENO, line, strlen(line)) < 0) { /* the test sees the line missing */ }
  r->finished = 1;
}

static struct exchange_result* exchange_watched;
static int exchange_watched_count;
static const char* exchange_watched_prefix = "";

static inline void exchange_on_alarm(int sig) {
  (void)sig;
  for (int i = 0; i < exchange_watched_count; ++i) {
    const struct exchange_result* r = &exchange_watched[i];
    if (r->finished) continue;
    /* async-signal-safe: write() of fixed pieces only */
    char index[12];
    size_t at = sizeof index;
    index[--at] = '\0';
    int n = i;
    do {
      index[--at] = (char)('0' + n % 10);
      n /= 10;
    } while (n > 0 && at > 0);
    const char* parts[] = {exchange_watched_prefix, "conn=", index + at, " port=0 result=fail step=",
                           (const char*)r->step, " error=hang bytes=0 mode=none fallback=\n"};
    for (size_t j = 0; j < sizeof parts / sizeof parts[0]; ++j) {
      if (write(STDOUT_FILENO, parts[j], strlen(parts[j])) < 0) break;
    }
  }
  _exit(3);
}

/* After `seconds`, print every unfinished exchange as hung and exit 3. */
static inline void exchange_watchdog(struct exchange_result* results, int count, const char* prefix,
                                     unsigned seconds) {
  exchange_watched = results;
  exchange_watched_count = count;
  exchange_watched_prefix = prefix;
  signal(SIGALRM, exchange_on_alarm);
  alarm(seconds);
}
