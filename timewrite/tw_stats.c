/*
 * tw_stats.c: medians of samples, for timewrite and syscost (tw_stats.h).
 */
#include <err.h>
#include <stdlib.h>
#include <string.h>

#include "tw_stats.h"

int
tw_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

void
tw_summarize(const double *v, long n, double *med, double *min, double *max)
{
	double *s;

	/* A sorted copy: the caller's samples stay in the order they were taken. */
	if ((s = malloc((size_t)n * sizeof(*s))) == NULL)
		err(1, "malloc");
	memcpy(s, v, (size_t)n * sizeof(*s));
	qsort(s, (size_t)n, sizeof(*s), tw_cmp_double);
	*med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	*min = s[0];
	*max = s[n - 1];
	free(s);
}

double
tw_median(const double *v, long n)
{
	double med, min, max;

	tw_summarize(v, n, &med, &min, &max);
	return med;
}
