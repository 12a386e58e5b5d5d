/* A hand-written client of sanecho.x as a user writes one: only the generated header, and the
 * nettype "via" as a string. Prints the server's answer; exits 1 with libtirpc's error text. */
#include <stdio.h>

#include "sanecho.h"

int main(int argc, char **argv) {
  const char *host = argc > 1 ? argv[1] : "127.0.0.1";
  CLIENT *c = clnt_create(host, SANECHO_PROG, SANECHO_VERS, "via");
  if (c == NULL) {
    clnt_pcreateerror(host);
    return 1;
  }
  char text[] = "over shared memory";
  char *arg = text;
  int *len = sanecho_len_1(&arg, c);
  if (len == NULL) {
    clnt_perror(c, "sanecho_len_1");
    return 1;
  }
  printf("%d\n", *len);
  clnt_destroy(c);
  return 0;
}
