/* Pattern (f), the socket-activated server: startup_activated DIR. Checks LISTEN_PID and
 * LISTEN_FDS as sd_listen_fds(3) does and accepts on fd 3 forever. */
#include "common.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR (started with LISTEN_FDS/LISTEN_PID)\n", argv[0]);
    return 2;
  }
  startup_dir = argv[1];
  const char* pid = getenv("LISTEN_PID");
  const char* fds = getenv("LISTEN_FDS");
  if (pid == NULL || atoi(pid) != (int)getpid() || fds == NULL || atoi(fds) != 1) {
    fprintf(stderr, "startup_activated: not activated (LISTEN_PID=%s, LISTEN_FDS=%s, pid %d)\n",
            pid ? pid : "", fds ? fds : "", (int)getpid());
    return 2;
  }
  unsetenv("LISTEN_PID");
  unsetenv("LISTEN_FDS");
  fcntl(3, F_SETFD, FD_CLOEXEC);
  startup_serving();
  startup_serve_forever(3);
}
