/* Pattern (f), the launcher of systemd-style socket activation:
 * startup_activate PORT DIR -- COMMAND [ARGS...]. Like systemd, it makes the listener, keeps its
 * own copy, and forks a child that puts the listener on fd 3, sets LISTEN_FDS=1 and
 * LISTEN_PID=<its pid> and execs COMMAND (which may itself be `sanrun -- server`: sanrun execs,
 * so the pid holds). The launcher then waits for the child. */
#include "common.h"

#include <sys/wait.h>

int main(int argc, char** argv) {
  if (argc < 5 || strcmp(argv[3], "--") != 0) {
    fprintf(stderr, "usage: %s PORT DIR -- COMMAND [ARGS...]\n", argv[0]);
    return 2;
  }
  startup_dir = argv[2];
  const int lfd = startup_listen(startup_port(argv[1]), 0);
  const pid_t child = fork();
  if (child < 0) startup_fail("fork");
  if (child == 0) {
    if (lfd != 3) {
      if (dup2(lfd, 3) != 3) startup_fail("dup2");
      close(lfd);
    }
    char pid[16];
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("LISTEN_FDS", "1", 1);
    setenv("LISTEN_PID", pid, 1);
    execvp(argv[4], argv + 4);
    startup_fail("exec");
  }
  startup_serving();
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
