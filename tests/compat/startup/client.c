/* startup_client PORT CONNECTIONS [PREFIX]: runs CONNECTIONS exchanges (exchange.h) with the echo
 * server on 127.0.0.1:PORT at once, one thread each, and prints one line per connection. Exit
 * status 0 when every exchange was intact and ended cleanly. Plain POSIX sockets: run under
 * sanrun it is a SAN client, else a plain one. Test-only. */
#include "exchange.h"

#include <pthread.h>
#include <stdlib.h>

enum { kMaxConnections = 32 };

struct job {
  uint16_t port;
  int index;
  const char* prefix;
  struct exchange_result* result;
};

static void* run_job(void* arg) {
  const struct job* j = arg;
  exchange_run(j->port, (unsigned)j->index, j->result);
  exchange_report(j->prefix, j->index, j->result);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PORT CONNECTIONS [PREFIX]\n", argv[0]);
    return 2;
  }
  const uint16_t port = (uint16_t)atoi(argv[1]);
  int count = atoi(argv[2]);
  if (count < 1 || count > kMaxConnections) count = 1;
  const char* prefix = argc > 3 ? argv[3] : "";
  static struct exchange_result results[kMaxConnections];
  struct job jobs[kMaxConnections];
  pthread_t threads[kMaxConnections];
  exchange_watchdog(results, count, prefix, 15);
  for (int i = 0; i < count; ++i) {
    results[i].step = "start";
    jobs[i] = (struct job){port, i, prefix, &results[i]};
    if (pthread_create(&threads[i], NULL, run_job, &jobs[i]) != 0) {
      perror("pthread_create");
      return 2;
    }
  }
  int failed = 0;
  for (int i = 0; i < count; ++i) {
    pthread_join(threads[i], NULL);
    failed += !results[i].ok;
  }
  return failed ? 1 : 0;
}
