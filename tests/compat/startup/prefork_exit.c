/* Pattern (b), prefork with the creator exiting: startup_prefork_exit PORT DIR WORKERS.
 * The creator listens, forks WORKERS children that accept on the inherited listener, and exits
 * at once: the listener lives on only in the workers. */
#include "common.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PORT DIR WORKERS\n", argv[0]);
    return 2;
  }
  startup_dir = argv[2];
  const int workers = atoi(argv[3]);
  const int lfd = startup_listen(startup_port(argv[1]), 0);
  for (int i = 0; i < workers; ++i) {
    const pid_t child = fork();
    if (child < 0) startup_fail("fork");
    if (child == 0) {
      startup_serving();
      startup_serve_forever(lfd);
    }
  }
  exit(0);
}
