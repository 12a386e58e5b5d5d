/* Pattern (e), a listener passed over SCM_RIGHTS: startup_pass_fd PORT DIR keep|exit.
 * The process forks a server child first (over a Unix socketpair), then makes the listener,
 * sends it to the child as SCM_RIGHTS and closes its own copy; with `exit` it then exits, with
 * `keep` it stays until stopped. The child accepts on the listener it received. */
#include "common.h"

#include <sys/uio.h>

static void send_fd(int channel, int fd) {
  char byte = 'L';
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof fd);
  if (sendmsg(channel, &msg, 0) != 1) startup_fail("sendmsg(SCM_RIGHTS)");
}

static int receive_fd(int channel) {
  char byte;
  struct iovec iov = {&byte, 1};
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } control;
  struct msghdr msg;
  memset(&msg, 0, sizeof msg);
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof control.buf;
  if (recvmsg(channel, &msg, 0) != 1) startup_fail("recvmsg(SCM_RIGHTS)");
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == NULL || c->cmsg_type != SCM_RIGHTS) {
    errno = EPROTO;
    startup_fail("no fd received");
  }
  int fd;
  memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return fd;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PORT DIR keep|exit\n", argv[0]);
    return 2;
  }
  startup_dir = argv[2];
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) startup_fail("socketpair");
  const pid_t child = fork();
  if (child < 0) startup_fail("fork");
  if (child == 0) {
    close(pair[0]);
    const int lfd = receive_fd(pair[1]);
    close(pair[1]);
    startup_serving();
    startup_serve_forever(lfd);
  }
  close(pair[1]);
  const int lfd = startup_listen(startup_port(argv[1]), 0);
  send_fd(pair[0], lfd);
  close(lfd);
  close(pair[0]);
  if (strcmp(argv[3], "exit") == 0) exit(0);
  startup_serving();
  for (;;) pause();
}
