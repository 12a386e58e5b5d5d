/* Builds and links against the installed sanlib::rpcvia target: prints the via nettype's name. */
#include <stdio.h>
#include <rpcvia/rpcvia.h>

int main(void) {
  rpcvia_set_fallback(RPCVIA_FALLBACK_TCP);
  printf("%s\n", RPCVIA_NETTYPE);
  return 0;
}
