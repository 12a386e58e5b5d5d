/* The checking both end-to-end RPC clients share: CHECK(cond) counts a check and, if cond is
 * false, a failure, printing where. Each client's main decides from the two counts (and how many
 * checks it expected to run) whether it passed.
 *
 * Single-threaded C; included by exactly one .c file per program (the counters are static). */
#ifndef RPCGEN_VIA_E2E_CHECK_H
#define RPCGEN_VIA_E2E_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond) \
	do { \
		checks++; \
		if (!(cond)) { \
			failures++; \
			fprintf (stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
		} \
	} while (0)

#endif /* RPCGEN_VIA_E2E_CHECK_H */
