/* A client of viatest.x built "the obvious way": rpcgen_via's stubs compiled without
 * RPCGEN_VIA_TRANSPORT, a plain clnt_create(..., "via"), linked -lrpcvia -lsan -ltirpc. Linking
 * librpcvia is all that makes "via" a nettype here (rpcvia/nettype_hook.cc).
 * Prints the data path the connection took ("shm", "verbs", "tcp") and the length the server
 * counted; exits 1 with libtirpc's error text if clnt_create or the call fails. */
#include <stdio.h>
#include <string.h>

#include "viatest.h"
#define RPCVIA_NO_MAPPING /* only for CLGET_VIA_MODE: the calls below keep their plain names */
#include <rpcvia/rpcvia.h>

int main(int argc, char **argv) {
  const char *host = argc > 1 ? argv[1] : "127.0.0.1";
  CLIENT *c = clnt_create(host, VIATEST_PROG, VIATEST_VERS, "via");
  if (c == NULL) {
    clnt_pcreateerror(host);
    return 1;
  }
  char hello[] = "hello, via";
  char *arg = hello;
  int *len = viatest_strlen_1(&arg, c);
  if (len == NULL) {
    clnt_perror(c, "viatest_strlen_1");
    return 1;
  }
  int mode = -1;
  clnt_control(c, CLGET_VIA_MODE, (char *)&mode);
  printf("%s %d\n", mode == 2 ? "shm" : mode == 3 ? "verbs" : mode == 1 ? "tcp" : "?", *len);
  clnt_destroy(c);
  return 0;
}
