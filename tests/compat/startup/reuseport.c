/* Pattern (d), an SO_REUSEPORT group: startup_reuseport PORT DIR PROCESSES. PROCESSES processes
 * (the first and its fork children) each make their own listener on the same port with
 * SO_REUSEPORT; the kernel spreads the connections over them. */
#include "common.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PORT DIR PROCESSES\n", argv[0]);
    return 2;
  }
  startup_dir = argv[2];
  const uint16_t port = startup_port(argv[1]);
  const int processes = atoi(argv[3]);
  for (int i = 1; i < processes; ++i) {
    const pid_t child = fork();
    if (child < 0) startup_fail("fork");
    if (child == 0) break;
  }
  const int lfd = startup_listen(port, 1);
  startup_serving();
  startup_serve_forever(lfd);
}
