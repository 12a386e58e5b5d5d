/* main() of the XDR fixture programs: `encode` prints "type seed hex" lines; `decode` reads them,
 * decodes, checks every byte was used and that re-encoding reproduces the bytes. */
#include "xdr_fixture_main.h"

#include <stdio.h>
#include <string.h>

enum { kSeeds = 12, kBufSize = 1 << 20 };

static uint64_t state;

uint32_t rnd32 (void) { return (uint32_t) (rnd64 () >> 16); }

uint64_t rnd64 (void)
{
	/* splitmix64: any seed gives a good sequence */
	uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

u_int pick_len (u_int bound, u_int cap, int depth)
{
	u_int m = bound < cap ? bound : cap;
	if (depth >= 3)
		return 0;
	return m == 0 ? 0 : rnd32 () % (m + 1);
}

static int encode (const struct fixture_type *t, void *obj, char *buf, u_int *len)
{
	XDR x;
	xdrmem_create (&x, buf, kBufSize, XDR_ENCODE);
	if (!t->proc (&x, obj))
		return 0;
	*len = xdr_getpos (&x);
	xdr_destroy (&x);
	return 1;
}

static int run_encode (char *buf)
{
	const struct fixture_type *t;
	int seed, failures = 0;
	for (t = fixture_types; t->name; t++) {
		for (seed = 0; seed < kSeeds; seed++) {
			void *obj = calloc (1, t->size);
			u_int len, i;
			state = (uint64_t) seed * 1000003u + (uint64_t) (t - fixture_types);
			t->fill (obj, 0);
			if (!encode (t, obj, buf, &len)) {
				printf ("%s %d ENCODE_FAILED\n", t->name, seed);
				failures++;
			} else {
				printf ("%s %d ", t->name, seed);
				for (i = 0; i < len; i++)
					printf ("%02x", (unsigned char) buf[i]);
				printf ("\n");
			}
			xdr_free (t->proc, obj);
			free (obj);
		}
	}
	return failures == 0 ? 0 : 1;
}

static int hexval (int c)
{
	if (c >= '0' && c <= '9') return c - '0';
	if (c >= 'a' && c <= 'f') return c - 'a' + 10;
	return -1;
}

static int run_decode (char *buf)
{
	static char line[4 * kBufSize];
	char *bytes = malloc (kBufSize);
	int checked = 0, failures = 0;
	while (fgets (line, sizeof line, stdin)) {
		char name[256], hex_dummy;
		int seed, n = 0;
		const struct fixture_type *t;
		const char *hex;
		u_int len = 0, relen = 0;
		void *obj;
		XDR x;
		int ok;
		if (sscanf (line, "%255s %d %n%c", name, &seed, &n, &hex_dummy) < 2)
			continue;
		for (t = fixture_types; t->name && strcmp (t->name, name) != 0; t++)
			;
		if (!t->name) {
			printf ("UNKNOWN_TYPE %s\n", name);
			failures++;
			continue;
		}
		for (hex = line + n; hexval (hex[0]) >= 0 && hexval (hex[1]) >= 0 && len < kBufSize; hex += 2)
			bytes[len++] = (char) (hexval (hex[0]) * 16 + hexval (hex[1]));
		obj = calloc (1, t->size);
		xdrmem_create (&x, bytes, len, XDR_DECODE);
		ok = t->proc (&x, obj) && xdr_getpos (&x) == len;
		xdr_destroy (&x);
		if (!ok) {
			printf ("DECODE_FAILED %s %d\n", name, seed);
			failures++;
		} else if (!encode (t, obj, buf, &relen) || relen != len || memcmp (buf, bytes, len) != 0) {
			printf ("REENCODE_MISMATCH %s %d\n", name, seed);
			failures++;
		}
		xdr_free (t->proc, obj);
		free (obj);
		checked++;
	}
	free (bytes);
	printf ("checked %d failures %d\n", checked, failures);
	return failures == 0 && checked > 0 ? 0 : 1;
}

int main (int argc, char **argv)
{
	char *buf = malloc (kBufSize);
	int rc;
	if (argc != 2 || (strcmp (argv[1], "encode") != 0 && strcmp (argv[1], "decode") != 0)) {
		fprintf (stderr, "usage: %s encode|decode\n", argv[0]);
		return 2;
	}
	rc = strcmp (argv[1], "encode") == 0 ? run_encode (buf) : run_decode (buf);
	free (buf);
	return rc;
}
