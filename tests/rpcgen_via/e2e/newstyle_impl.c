/* Server procedures of newstyle.x with -N signatures (arguments by value, several arguments), in
 * the default form or, with -DNEWSTYLE_MT, the -M form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "newstyle.h"

#ifdef NEWSTYLE_MT
bool_t ping_1_svc (void *result, struct svc_req *rqstp) { (void) result; (void) rqstp; return TRUE; }

bool_t add3_1_svc (int a, int b, int c, int *result, struct svc_req *rqstp)
{
	(void) rqstp;
	*result = a + b + c;
	return TRUE;
}

bool_t join_1_svc (char *a, char *b, char **result, struct svc_req *rqstp)
{
	size_t n = strlen (a) + strlen (b) + 2;
	(void) rqstp;
	*result = malloc (n);
	snprintf (*result, n, "%s/%s", a, b);
	return TRUE;
}

bool_t swap_1_svc (pair p, pair *result, struct svc_req *rqstp)
{
	(void) rqstp;
	result->a = p.b;
	result->b = p.a;
	return TRUE;
}

bool_t scale_1_svc (pair p, quad_t k, quad_t *result, struct svc_req *rqstp)
{
	(void) rqstp;
	*result = ((quad_t) p.a + p.b) * k;
	return TRUE;
}

int newstyle_prog_1_freeresult (SVCXPRT *transp, xdrproc_t proc, caddr_t result)
{
	(void) transp;
	xdr_free (proc, result);
	return 1;
}
#else
void *ping_1_svc (struct svc_req *rqstp)
{
	static char nothing;
	(void) rqstp;
	return &nothing;
}

int *add3_1_svc (int a, int b, int c, struct svc_req *rqstp)
{
	static int sum;
	(void) rqstp;
	sum = a + b + c;
	return &sum;
}

char **join_1_svc (char *a, char *b, struct svc_req *rqstp)
{
	static char buf[1024];
	static char *reply = buf;
	(void) rqstp;
	snprintf (buf, sizeof buf, "%s/%s", a, b);
	return &reply;
}

pair *swap_1_svc (pair p, struct svc_req *rqstp)
{
	static pair r;
	(void) rqstp;
	r.a = p.b;
	r.b = p.a;
	return &r;
}

quad_t *scale_1_svc (pair p, quad_t k, struct svc_req *rqstp)
{
	static quad_t r;
	(void) rqstp;
	r = ((quad_t) p.a + p.b) * k;
	return &r;
}
#endif
