/* End-to-end client for newstyle.x (-N stubs; -M ones with -DNEWSTYLE_MT). Usage: host nettype. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_check.h"
#include "newstyle.h"

int main (int argc, char **argv)
{
	CLIENT *c;
	pair p = { 3, 4 };
	if (argc != 3) {
		fprintf (stderr, "usage: %s host nettype\n", argv[0]);
		return 2;
	}
	c = clnt_create (argv[1], NEWSTYLE_PROG, NEWSTYLE_V1, argv[2]);
	if (c == NULL) {
		clnt_pcreateerror (argv[1]);
		return 1;
	}
#ifdef NEWSTYLE_MT
	{
		char nothing;
		int sum = 0;
		char *joined = NULL;
		pair swapped = { 0, 0 };
		quad_t scaled = 0;
		CHECK (ping_1 (&nothing, c) == RPC_SUCCESS);
		CHECK (add3_1 (1, 20, 300, &sum, c) == RPC_SUCCESS && sum == 321);
		CHECK (join_1 ("left", "right", &joined, c) == RPC_SUCCESS && joined && strcmp (joined, "left/right") == 0);
		xdr_free ((xdrproc_t) xdr_wrapstring, (char *) &joined);
		CHECK (swap_1 (p, &swapped, c) == RPC_SUCCESS && swapped.a == 4 && swapped.b == 3);
		CHECK (scale_1 (p, 1000000000000LL, &scaled, c) == RPC_SUCCESS && scaled == 7000000000000LL);
	}
#else
	{
		int *sum;
		char **joined;
		pair *swapped;
		quad_t *scaled;
		CHECK (ping_1 (c) != NULL);
		sum = add3_1 (1, 20, 300, c);
		CHECK (sum != NULL && *sum == 321);
		joined = join_1 ("left", "right", c);
		CHECK (joined != NULL && strcmp (*joined, "left/right") == 0);
		if (joined) xdr_free ((xdrproc_t) xdr_wrapstring, (char *) joined);
		swapped = swap_1 (p, c);
		CHECK (swapped != NULL && swapped->a == 4 && swapped->b == 3);
		scaled = scale_1 (p, 1000000000000LL, c);
		CHECK (scaled != NULL && *scaled == 7000000000000LL);
	}
#endif
	clnt_destroy (c);
	printf ("%d checks, %d failures\n", checks, failures);
	return failures == 0 && checks == 5 ? 0 : 1;
}

/* See langtest_values.c: libtirpc's own clnt_create leak, under LSan only. */
const char *__lsan_default_suppressions (void);
const char *__lsan_default_suppressions (void) { return "leak:clnt_tp_create_timed\n"; }
const char *__asan_default_options (void);
const char *__asan_default_options (void) { return "fast_unwind_on_malloc=0"; }
