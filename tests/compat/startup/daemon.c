/* Pattern (a), listen then daemonise: startup_daemon PORT DIR single|double [EXIT_DELAY_MS].
 * The classic start-up: listen(), then fork and let the parent exit(0); the child accepts forever.
 * `double` is the full daemon(3) dance: fork, setsid, fork again, each parent exiting. With an exit
 * delay the first parent lingers that long after the fork, so clients connect while it exits. */
#include "common.h"

#include <sys/types.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PORT DIR single|double [EXIT_DELAY_MS]\n", argv[0]);
    return 2;
  }
  startup_dir = argv[2];
  const int twice = strcmp(argv[3], "double") == 0;
  const int delay_ms = argc > 4 ? atoi(argv[4]) : 0;
  const int lfd = startup_listen(startup_port(argv[1]), 0);
  pid_t child = fork();
  if (child < 0) startup_fail("fork");
  if (child > 0) {
    if (delay_ms > 0) usleep((useconds_t)delay_ms * 1000);
    exit(0);
  }
  if (twice) {
    if (setsid() < 0) startup_fail("setsid");
    child = fork();
    if (child < 0) startup_fail("fork");
    if (child > 0) exit(0);
  }
  startup_serving();
  startup_serve_forever(lfd);
}
