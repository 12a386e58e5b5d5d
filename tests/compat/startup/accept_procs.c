/* Pattern (g), accept in several processes at once: startup_accept_procs PORT DIR PROCESSES.
 * The creator listens and forks PROCESSES-1 children; all of them, the creator included, block in
 * accept() on the one inherited listener and echo what they accept. */
#include "common.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PORT DIR PROCESSES\n", argv[0]);
    return 2;
  }
  startup_dir = argv[2];
  const int processes = atoi(argv[3]);
  const int lfd = startup_listen(startup_port(argv[1]), 0);
  for (int i = 1; i < processes; ++i) {
    const pid_t child = fork();
    if (child < 0) startup_fail("fork");
    if (child == 0) break;
  }
  startup_serving();
  startup_accept_and_echo_forever(lfd);
}
