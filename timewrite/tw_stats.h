/*
 * tw_stats.h: the numeric helpers the C programs share (timewrite, syscost).
 *
 * Both report medians of their samples; one definition keeps them from
 * drifting apart (an even count's median is the mean of the middle two).
 */
#ifndef TW_STATS_H
#define TW_STATS_H

/* qsort comparison of two doubles, ascending. */
int tw_cmp_double(const void *a, const void *b);

/* Median, minimum and maximum of n >= 1 samples; v keeps its order. */
void tw_summarize(const double *v, long n, double *med, double *min, double *max);

/* The median of n >= 1 samples; v keeps its order. */
double tw_median(const double *v, long n);

#endif
