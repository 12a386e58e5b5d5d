/* The runtime of the programs xdr_fixture_gen writes (see xdr_fixture_gen.cc): a deterministic
 * random source, the table of types each generated file provides, and main() (xdr_fixture_main.c).
 */
#ifndef RPCGEN_VIA_XDR_FIXTURE_MAIN_H
#define RPCGEN_VIA_XDR_FIXTURE_MAIN_H

#include <rpc/rpc.h>
#include <stdint.h>
#include <stdlib.h>

struct fixture_type {
  const char* name;
  size_t size;
  xdrproc_t proc;
  void (*fill)(void* object, int depth);
};

/* The generated file's table, ended by a zero entry. */
extern const struct fixture_type fixture_types[];

uint32_t rnd32(void);
uint64_t rnd64(void);
/* A length in [0, min(bound, cap)], and 0 deep in recursive data so values stay small. */
u_int pick_len(u_int bound, u_int cap, int depth);

#endif
