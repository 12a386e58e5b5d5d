/* An out-of-tree program using only the installed <san/san.h> and libsan (tests/install):
 *   echo_peer serve PORTFILE       listens on 127.0.0.1 (any port, written to PORTFILE), echoes
 *                                  one connection until EOF, prints the connection's mode
 *   echo_peer call PORT MESSAGE    sends MESSAGE, checks it comes back, prints the mode
 * With `plain` as first word it uses kernel sockets only (a peer that is not sanlib): then the
 * same source, built without libsan, is the plain peer and, under sanrun, a preloaded program.
 * Modes print as shm, verbs, tcp; exit status 1 on any failure. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifdef ECHO_PEER_PLAIN
#define SOCKET(d, t, p) socket(d, t, p)
#define BIND bind
#define LISTEN listen
#define ACCEPT accept
#define CONNECT connect
#define SEND send
#define RECV recv
#define SHUTDOWN shutdown
#define CLOSE close
#define GETSOCKNAME getsockname
#define STREAM SOCK_STREAM
static const char *Mode(int fd) { (void)fd; return "kernel"; }
#else
#include <san/san.h>
#define SOCKET(d, t, p) san_socket(d, t, p)
#define BIND san_bind
#define LISTEN san_listen
#define ACCEPT san_accept
#define CONNECT san_connect
#define SEND san_send
#define RECV san_recv
#define SHUTDOWN san_shutdown
#define CLOSE san_close
#define GETSOCKNAME san_getsockname
#define STREAM SOCK_SAN
static const char *Mode(int fd) {
  struct san_info info;
  if (san_getinfo(fd, &info) != 0) return "?";
  return info.mode == SAN_MODE_SHM ? "shm" : info.mode == SAN_MODE_VERBS ? "verbs" : "tcp";
}
#endif

static int Fail(const char *what) {
  perror(what);
  return 1;
}

static int Serve(const char *port_file) {
  int fd = SOCKET(AF_INET, STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || BIND(fd, (struct sockaddr *)&a, sizeof a) != 0 || LISTEN(fd, 4) != 0 ||
      GETSOCKNAME(fd, (struct sockaddr *)&a, &len) != 0) {
    return Fail("listen");
  }
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
  FILE *f = fopen(tmp, "w");
  if (f == NULL) return Fail(tmp);
  fprintf(f, "%d\n", ntohs(a.sin_port));
  if (fclose(f) != 0 || rename(tmp, port_file) != 0) return Fail(port_file);
  int c = ACCEPT(fd, NULL, NULL);
  if (c < 0) return Fail("accept");
  char buf[4096];
  ssize_t n;
  while ((n = RECV(c, buf, sizeof buf, 0)) > 0) {
    if (SEND(c, buf, (size_t)n, 0) != n) return Fail("send");
  }
  printf("%s\n", Mode(c));
  CLOSE(c);
  CLOSE(fd);
  return n == 0 ? 0 : Fail("recv");
}

static int Call(int port, const char *message) {
  int fd = SOCKET(AF_INET, STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((unsigned short)port);
  if (fd < 0 || CONNECT(fd, (struct sockaddr *)&a, sizeof a) != 0) return Fail("connect");
  const size_t len = strlen(message);
  if (SEND(fd, message, len, 0) != (ssize_t)len || SHUTDOWN(fd, SHUT_WR) != 0) {
    return Fail("send");
  }
  char back[4096];
  size_t got = 0;
  ssize_t n;
  while (got < sizeof back && (n = RECV(fd, back + got, sizeof back - got, 0)) > 0) got += (size_t)n;
  if (got != len || memcmp(back, message, len) != 0) {
    fprintf(stderr, "echo_peer: %zu bytes came back, not the %zu sent\n", got, len);
    return 1;
  }
  printf("%s\n", Mode(fd));
  CLOSE(fd);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "serve") == 0) return Serve(argv[2]);
  if (argc == 4 && strcmp(argv[1], "call") == 0) return Call(atoi(argv[2]), argv[3]);
  fprintf(stderr, "usage: echo_peer serve PORTFILE | echo_peer call PORT MESSAGE\n");
  return 2;
}
