/* The server procedures of langtest.x, linked with either compiler's server skeleton. Built twice:
 * with rpcgen's default signatures (static results) and, with -DLANGTEST_MT, the -M ones (results
 * in the skeleton's storage, freed by langtest_prog_N_freeresult). PROC() hides the difference:
 * each body fills *result from *argp. */
#include <stdio.h>
#include <string.h>

#include "langtest.h"
#include "langtest_values.h"

#ifdef LANGTEST_MT
#define PROC(restype, xdrres, name, argtype)                                                     \
	static void name##_body (argtype *argp, restype *result);                                 \
	bool_t name##_svc (argtype *argp, restype *result, struct svc_req *rqstp)                \
	{                                                                                         \
		(void) rqstp;                                                                     \
		memset (result, 0, sizeof (*result));                                             \
		name##_body (argp, result);                                                       \
		return TRUE;                                                                      \
	}                                                                                         \
	static void name##_body (argtype *argp, restype *result)

static int freeresult (xdrproc_t proc, caddr_t result)
{
	xdr_free (proc, result);
	return 1;
}
int langtest_prog_1_freeresult (SVCXPRT *t, xdrproc_t p, caddr_t r) { (void) t; return freeresult (p, r); }
int langtest_prog_2_freeresult (SVCXPRT *t, xdrproc_t p, caddr_t r) { (void) t; return freeresult (p, r); }
#else
/* A static result, freed when the next call of the same procedure replaces it. */
#define PROC(restype, xdrres, name, argtype)                                                     \
	static void name##_body (argtype *argp, restype *result);                                 \
	restype *name##_svc (argtype *argp, struct svc_req *rqstp)                                \
	{                                                                                         \
		static restype r;                                                                 \
		(void) rqstp;                                                                     \
		xdr_free ((xdrproc_t) xdrres, (char *) &r);                                       \
		memset (&r, 0, sizeof (r));                                                       \
		name##_body (argp, &r);                                                           \
		return &r;                                                                        \
	}                                                                                         \
	static void name##_body (argtype *argp, restype *result)
#endif

#define ECHO(type, name)                                                                         \
	PROC (type, xdr_##type, name, type)                                                       \
	{                                                                                         \
		deep_copy ((xdrproc_t) xdr_##type, argp, result);                                 \
	}

#ifdef LANGTEST_MT
bool_t nullproc_1_svc (void *argp, void *result, struct svc_req *rqstp)
{
	(void) argp; (void) result; (void) rqstp;
	return TRUE;
}
bool_t nullproc_2_svc (void *argp, void *result, struct svc_req *rqstp)
{
	return nullproc_1_svc (argp, result, rqstp);
}
#else
void *nullproc_1_svc (void *argp, struct svc_req *rqstp)
{
	static char nothing;
	(void) argp; (void) rqstp;
	return &nothing;
}
void *nullproc_2_svc (void *argp, struct svc_req *rqstp) { return nullproc_1_svc (argp, rqstp); }
#endif

/* Wrapping addition: hostile-input tests send any values, and signed overflow is undefined. */
PROC (int, xdr_int, add_1, point) { *result = (int) ((unsigned) argp->x + (unsigned) argp->y); }
ECHO (scalars, echo_scalars_1)
ECHO (node, echo_list_1)
ECHO (arrays, echo_arrays_1)
ECHO (result, echo_result_1)
ECHO (everything, echo_everything_1)

PROC (name_t, xdr_name_t, greet_1, name_t)
{
	*result = malloc (MAXNAME + 1);
	snprintf (*result, MAXNAME + 1, "hi %s", *argp);
}

PROC (bool_t, xdr_bool, is_red_1, color) { *result = *argp == RED; }

PROC (quad_t, xdr_quad_t, sum_2, intarr)
{
	u_int i;
	*result = 0;
	for (i = 0; i < argp->intarr_len; i++)
		*result += argp->intarr_val[i];
}

PROC (everything_ptr, xdr_everything_ptr, maybe_2, bool_t)
{
	*result = NULL;
	if (*argp) {
		*result = calloc (1, sizeof (everything));
		make_everything (*result, 5);
	}
}

PROC (char *, xdr_wrapstring, concat_2, anystr)
{
	size_t n = 2 * strlen (*argp) + 2;
	*result = malloc (n);
	snprintf (*result, n, "%s+%s", *argp, *argp);
}
