/* Pattern (c), prefork with the creator turning client: startup_prefork_client PORT DIR WORKERS
 * CONNECTIONS. The creator listens, forks WORKERS children that accept on the inherited listener,
 * closes its own copy, then connects to the workers itself: CONNECTIONS exchanges (exchange.h),
 * one after the other, each printed as "creator conn=..." on stdout, then "creator-done". It
 * then stays (as a supervising parent would) until the test stops it. */
#include "common.h"
#include "exchange.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s PORT DIR WORKERS CONNECTIONS\n", argv[0]);
    return 2;
  }
  startup_dir = argv[2];
  const uint16_t port = startup_port(argv[1]);
  const int workers = atoi(argv[3]);
  int count = atoi(argv[4]);
  if (count < 1 || count > 16) count = 1;
  const int lfd = startup_listen(port, 0);
  for (int i = 0; i < workers; ++i) {
    const pid_t child = fork();
    if (child < 0) startup_fail("fork");
    if (child == 0) {
      startup_serving();
      startup_serve_forever(lfd);
    }
  }
  close(lfd);
  startup_serving();
  struct exchange_result results[16];
  memset(results, 0, sizeof results);
  exchange_watchdog(results, count, "creator ", 30);
  for (int i = 0; i < count; ++i) {
    results[i].step = "start";
    exchange_run(port, (unsigned)i, &results[i]);
    exchange_report("creator ", i, &results[i]);
  }
  alarm(60);
  static const char done[] = "creator-done\n";
  if (write(STDOUT_FILENO, done, sizeof done - 1) < 0) return 1;
  for (;;) pause();
}
