/*
 * json_out.c: JSON strings and sample arrays for the C programs' output.
 *
 * File names are bytes and JSON text is Unicode.  A path with a byte that is
 * not valid UTF-8 (a results directory copied from another system, say) must
 * not make the whole document unparseable: valid UTF-8 passes through,
 * control characters are escaped, and any other byte becomes U+FFFD.
 */
#include <stdarg.h>
#include <stdio.h>

#include "json_out.h"

void
json_string(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int i, k;

	putchar('"');
	while (*p != '\0') {
		if (*p == '"' || *p == '\\') {
			printf("\\%c", *p++);
			continue;
		}
		if (*p < 0x20) {
			printf("\\u%04x", *p++);
			continue;
		}
		if (*p < 0x80) {
			putchar(*p++);
			continue;
		}
		/* Length of the UTF-8 sequence the lead byte announces. */
		if (*p >= 0xc2 && *p <= 0xdf)
			k = 1;
		else if (*p >= 0xe0 && *p <= 0xef)
			k = 2;
		else if (*p >= 0xf0 && *p <= 0xf4)
			k = 3;
		else
			k = -1;
		for (i = 1; k > 0 && i <= k; i++)
			if ((p[i] & 0xc0) != 0x80)
				k = -1;
		/* Overlong forms, surrogates and values past U+10FFFF. */
		if (k == 2 && ((p[0] == 0xe0 && p[1] < 0xa0) ||
		    (p[0] == 0xed && p[1] >= 0xa0)))
			k = -1;
		if (k == 3 && ((p[0] == 0xf0 && p[1] < 0x90) ||
		    (p[0] == 0xf4 && p[1] >= 0x90)))
			k = -1;
		if (k < 0) {
			fputs("\\ufffd", stdout);
			p++;
			continue;
		}
		fwrite(p, 1, k + 1, stdout);
		p += k + 1;
	}
	putchar('"');
}

/*
 * "key":[e0,e1,...]: the one array printer; put(v, i, digits) prints element
 * i of v, which is each array's own type.
 */
static void
array(const char *key, const void *v, long n, int digits,
    void (*put)(const void *v, long i, int digits))
{
	long i;

	json_string(key);
	fputs(":[", stdout);
	for (i = 0; i < n; i++) {
		if (i > 0)
			putchar(',');
		put(v, i, digits);
	}
	putchar(']');
}

static void
put_fixed(const void *v, long i, int digits)
{
	printf("%.*f", digits, ((const double *)v)[i]);
}

static void
put_int(const void *v, long i, int digits)
{
	(void)digits;
	printf("%lld", ((const long long *)v)[i]);
}

static void
put_bool(const void *v, long i, int digits)
{
	(void)digits;
	fputs(((const unsigned char *)v)[i] ? "true" : "false", stdout);
}

void
json_array(const char *key, const double *v, long n, int digits)
{
	array(key, v, n, digits, put_fixed);
}

void
json_arrays(long n, int digits, ...)
{
	va_list ap;
	const char *key;
	int first = 1;

	va_start(ap, digits);
	while ((key = va_arg(ap, const char *)) != NULL) {
		if (!first)
			putchar(',');
		json_array(key, va_arg(ap, const double *), n, digits);
		first = 0;
	}
	va_end(ap);
}

void
json_int_array(const char *key, const long long *v, long n)
{
	array(key, v, n, 0, put_int);
}

void
json_bool_array(const char *key, const unsigned char *v, long n)
{
	array(key, v, n, 0, put_bool);
}
