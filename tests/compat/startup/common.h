/* Shared by the start-up pattern servers (tests/compat/startup_patterns_test.cc): a loopback
 * listener, the echo service, and the records the test reads in the server's state directory:
 *   DIR/pids    every process that serves (one pid a line), so the test can stop daemons that
 *               left its process group;
 *   DIR/served  one line per connection, written before its close: the peer's port, the bytes
 *               echoed, how it ended and this end's SAN mode; and one line per failed accept.
 * Plain POSIX sockets only, so the programs run unmodified under sanrun (and plain). Every
 * serving process arms alarm(60): nothing outlives a broken test for long. Test-only. */
#pragma once

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "san_mode.h"

static const char* startup_dir = ".";

__attribute__((noreturn)) static inline void startup_fail(const char* what) {
  fprintf(stderr, "startup server %d: %s: %s\n", (int)getpid(), what, strerror(errno));
  exit(2);
}

/* One line appended to DIR/name in a single write (several processes share the file). */
static inline void startup_append(const char* name, const char* line) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", startup_dir, name);
  const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, line, strlen(line)) < 0) { /* the test reports the missing line */ }
  close(fd);
}

/* This process serves: recorded for the test's clean-up, and bounded in time. */
static inline void startup_serving(void) {
  char line[32];
  snprintf(line, sizeof line, "%d\n", (int)getpid());
  startup_append("pids", line);
  alarm(60);
}

static inline uint16_t startup_port(const char* arg) {
  const long port = strtol(arg, NULL, 10);
  if (port <= 0 || port > 65535) {
    fprintf(stderr, "bad port %s\n", arg);
    exit(2);
  }
  return (uint16_t)port;
}

/* A listener on 127.0.0.1:port, inheritable across exec (some patterns exec with it). */
static inline int startup_listen(uint16_t port, int reuseport) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) startup_fail("socket");
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0)
    startup_fail("SO_REUSEPORT");
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0) startup_fail("bind");
  if (listen(fd, 128) != 0) startup_fail("listen");
  return fd;
}

static inline unsigned startup_peer_port(int fd) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  memset(&a, 0, sizeof a);
  if (getpeername(fd, (struct sockaddr*)&a, &len) != 0) return 0;
  return ntohs(a.sin_port);
}

static inline int startup_write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Echoes one connection until EOF (or an error, or 10 s of silence), logs it, closes it. */
static inline void startup_echo(int fd) {
  char buf[16384], why[96] = "", line[512];
  const char* mode = san_mode_of(fd, why, sizeof why);
  const char* result = "eof";
  size_t total = 0;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    const int ready = poll(&p, 1, 10000);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      result = "timeout";
      break;
    }
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result = strerrorname_np(errno);
      break;
    }
    if (n == 0) break;
    mode = san_mode_of(fd, why, sizeof why); /* the mode while the connection carries data */
    if (startup_write_all(fd, buf, (size_t)n) != 0) {
      result = strerrorname_np(errno);
      break;
    }
    total += (size_t)n;
  }
  snprintf(line, sizeof line, "served pid=%d peer_port=%u bytes=%zu result=%s mode=%s fallback=%s\n",
           (int)getpid(), startup_peer_port(fd), total, result ? result : "error", mode, why);
  startup_append("served", line);
  close(fd);
}

/* accept() once; failures are logged (a reset client shows here as ECONNABORTED) and paced. */
static inline int startup_accept(int lfd) {
  for (;;) {
    const int c = accept(lfd, NULL, NULL);
    if (c >= 0) return c;
    if (errno == EINTR) continue;
    char line[128];
    snprintf(line, sizeof line, "accept pid=%d error=%s\n", (int)getpid(), strerrorname_np(errno));
    startup_append("served", line);
    usleep(20000);
  }
}

static inline void* startup_echo_thread(void* arg) {
  startup_echo((int)(intptr_t)arg);
  return NULL;
}

/* Accepts forever, one thread per connection. */
__attribute__((noreturn)) static inline void startup_serve_forever(int lfd) {
  for (;;) {
    const int c = startup_accept(lfd);
    pthread_t t;
    if (pthread_create(&t, NULL, startup_echo_thread, (void*)(intptr_t)c) != 0) {
      startup_echo(c);
      continue;
    }
    pthread_detach(t);
  }
}

/* Accepts forever, echoing each connection before the next accept (for several acceptors). */
__attribute__((noreturn)) static inline void startup_accept_and_echo_forever(int lfd) {
  for (;;) startup_echo(startup_accept(lfd));
}
