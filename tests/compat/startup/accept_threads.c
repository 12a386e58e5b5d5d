/* Pattern (g), accept in several threads at once: startup_accept_threads PORT DIR THREADS.
 * THREADS threads each block in accept() on the one listener and echo what they accept. */
#include "common.h"

static void* acceptor(void* arg) {
  startup_accept_and_echo_forever((int)(intptr_t)arg);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s PORT DIR THREADS\n", argv[0]);
    return 2;
  }
  startup_dir = argv[2];
  const int threads = atoi(argv[3]);
  const int lfd = startup_listen(startup_port(argv[1]), 0);
  startup_serving();
  for (int i = 1; i < threads; ++i) {
    pthread_t t;
    if (pthread_create(&t, NULL, acceptor, (void*)(intptr_t)lfd) != 0) startup_fail("pthread_create");
    pthread_detach(t);
  }
  acceptor((void*)(intptr_t)lfd);
  return 0;
}
