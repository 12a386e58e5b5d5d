/* End-to-end client for langtest.x: calls every procedure of both versions over the given nettype
 * and checks each reply. Usage: langtest_client host nettype. Exit 0 only if every check passed.
 * Built with rpcgen's default stubs (static results) or, with -DLANGTEST_MT, the -M ones; CALL()
 * hides the difference and yields a pointer to the result or NULL. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_check.h"
#include "langtest.h"
#include "langtest_values.h"

#ifdef LANGTEST_MT
#define CALL(fn, arg, restype, out)                                                              \
	do {                                                                                      \
		static restype storage_;                                                          \
		memset (&storage_, 0, sizeof (storage_));                                         \
		out = fn (arg, &storage_, c) == RPC_SUCCESS ? &storage_ : NULL;                   \
	} while (0)
#else
#define CALL(fn, arg, restype, out) (out = fn (arg, c))
#endif

static void version1 (CLIENT *c)
{
	point p = { 30, 12 };
	int *sum;
	scalars s, *rs;
	node *list, *rl;
	arrays a, *ra;
	result r, *rr;
	everything e, *re;
	name_t who = "bob", *greeting;
	color col;
	bool_t *red;
	char *nothing;
	int k;

	CALL (nullproc_1, NULL, char, nothing);
	CHECK (nothing != NULL);
	CALL (add_1, &p, int, sum);
	CHECK (sum != NULL && *sum == 42);

	make_scalars (&s, 3);
	CALL (echo_scalars_1, &s, scalars, rs);
	CHECK (rs != NULL && same_value ((xdrproc_t) xdr_scalars, &s, rs));
	CHECK (rs != NULL && rs->uh == s.uh && rs->h == s.h && rs->f == s.f && rs->d == s.d);
	if (rs) xdr_free ((xdrproc_t) xdr_scalars, (char *) rs);

	list = make_list (4);
	CALL (echo_list_1, list, node, rl);
	CHECK (rl != NULL && same_value ((xdrproc_t) xdr_node, list, rl));
	CHECK (rl != NULL && rl->next && rl->next->next && rl->next->next->next &&
	       rl->next->next->next->next == NULL && strcmp (rl->next->label, "node-2") == 0);
	if (rl) xdr_free ((xdrproc_t) xdr_node, (char *) rl);
	xdr_free ((xdrproc_t) xdr_node, (char *) list);
	free (list);

	for (k = 0; k < 2; k++) {
		make_arrays (&a, k);
		CALL (echo_arrays_1, &a, arrays, ra);
		CHECK (ra != NULL && same_value ((xdrproc_t) xdr_arrays, &a, ra));
		if (ra) xdr_free ((xdrproc_t) xdr_arrays, (char *) ra);
		xdr_free ((xdrproc_t) xdr_arrays, (char *) &a);
	}

	/* Every union arm: the list, arrays (two labels), void, and default. */
	for (k = 0; k < 5; k++) {
		memset (&r, 0, sizeof r);
		r.status = k == 4 ? -5 : k;
		if (k == 0) r.result_u.list = make_list (2);
		if (k == 1 || k == 2) make_arrays (&r.result_u.arr, k);
		if (k == 4) r.result_u.error = strdup ("went wrong");
		CALL (echo_result_1, &r, result, rr);
		CHECK (rr != NULL && rr->status == r.status && same_value ((xdrproc_t) xdr_result, &r, rr));
		if (rr) xdr_free ((xdrproc_t) xdr_result, (char *) rr);
		xdr_free ((xdrproc_t) xdr_result, (char *) &r);
	}

	for (k = 0; k < 4; k++) {
		make_everything (&e, k);
		CALL (echo_everything_1, &e, everything, re);
		CHECK (re != NULL && same_value ((xdrproc_t) xdr_everything, &e, re));
		if (re) xdr_free ((xdrproc_t) xdr_everything, (char *) re);
		xdr_free ((xdrproc_t) xdr_everything, (char *) &e);
	}

	CALL (greet_1, &who, name_t, greeting);
	CHECK (greeting != NULL && strcmp (*greeting, "hi bob") == 0);
	if (greeting) xdr_free ((xdrproc_t) xdr_name_t, (char *) greeting);

	col = RED;
	CALL (is_red_1, &col, bool_t, red);
	CHECK (red != NULL && *red == TRUE);
	col = BLUE;
	CALL (is_red_1, &col, bool_t, red);
	CHECK (red != NULL && *red == FALSE);
}

static void version2 (CLIENT *c)
{
	int values[] = { 5, -3, 1000000, 7 };
	intarr ia = { 4, values };
	quad_t *sum;
	bool_t yes = TRUE, no = FALSE;
	everything_ptr *maybe;
	everything expected;
	anystr s = "ab";
	char **joined;
	char *nothing;

	CALL (nullproc_2, NULL, char, nothing);
	CHECK (nothing != NULL);
	CALL (sum_2, &ia, quad_t, sum);
	CHECK (sum != NULL && *sum == 1000009);
	CALL (maybe_2, &no, everything_ptr, maybe);
	CHECK (maybe != NULL && *maybe == NULL);
	CALL (maybe_2, &yes, everything_ptr, maybe);
	make_everything (&expected, 5);
	CHECK (maybe != NULL && *maybe != NULL && same_value ((xdrproc_t) xdr_everything, &expected, *maybe));
	xdr_free ((xdrproc_t) xdr_everything, (char *) &expected);
	if (maybe) xdr_free ((xdrproc_t) xdr_everything_ptr, (char *) maybe);
	CALL (concat_2, &s, char *, joined);
	CHECK (joined != NULL && strcmp (*joined, "ab+ab") == 0);
	if (joined) xdr_free ((xdrproc_t) xdr_wrapstring, (char *) joined);
}

int main (int argc, char **argv)
{
	CLIENT *c1, *c2;
	if (argc != 3) {
		fprintf (stderr, "usage: %s host nettype\n", argv[0]);
		return 2;
	}
	c1 = clnt_create (argv[1], LANGTEST_PROG, LANGTEST_V1, argv[2]);
	if (c1 == NULL) {
		clnt_pcreateerror (argv[1]);
		return 1;
	}
	c2 = clnt_create (argv[1], LANGTEST_PROG, LANGTEST_V2, argv[2]);
	if (c2 == NULL) {
		clnt_pcreateerror (argv[1]);
		return 1;
	}
	version1 (c1);
	version2 (c2);
	clnt_destroy (c1);
	clnt_destroy (c2);
	printf ("%d checks, %d failures\n", checks, failures);
	return failures == 0 && checks > 20 ? 0 : 1;
}
