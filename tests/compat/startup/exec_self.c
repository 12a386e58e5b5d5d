/* Pattern (h), a server that execs itself keeping its listener: startup_exec_self PORT DIR [FD].
 * Without FD it listens, then execs /proc/self/exe with the listener's fd number appended (the
 * listener is not close-on-exec); with FD it accepts on that fd forever (a re-exec for an
 * upgrade or a privilege change keeps its listener this way). */
#include "common.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PORT DIR [FD]\n", argv[0]);
    return 2;
  }
  startup_dir = argv[2];
  if (argc > 3) {
    startup_serving();
    startup_serve_forever(atoi(argv[3]));
  }
  const int lfd = startup_listen(startup_port(argv[1]), 0);
  char fd[16];
  snprintf(fd, sizeof fd, "%d", lfd);
  char* args[] = {argv[0], argv[1], argv[2], fd, NULL};
  execv("/proc/self/exe", args);
  startup_fail("exec");
}
