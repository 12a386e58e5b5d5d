/* Sample values of langtest.x's types for the end-to-end client, and deep comparison through XDR
 * (two values are equal when they encode to the same bytes). Builders allocate with malloc; free
 * with xdr_free. */
#ifndef RPCGEN_VIA_LANGTEST_VALUES_H
#define RPCGEN_VIA_LANGTEST_VALUES_H

#include "langtest.h"

void make_scalars (scalars *s, int k);
node *make_list (int n);
void make_arrays (arrays *a, int k);
void make_everything (everything *e, int k);
/* Deep copy through XDR (encode src, decode into the zeroed dst); 1 on success. */
int deep_copy (xdrproc_t proc, void *src, void *dst);
/* 1 when a and b encode to the same bytes with proc. */
int same_value (xdrproc_t proc, void *a, void *b);

#endif
