/*
 * clock.h: syscost's clocks: the TSC when it is invariant, else
 * CLOCK_MONOTONIC_RAW; the thread's CPU time for off-CPU time.
 *
 * The TSC is read as lfence;rdtsc before a batch and rdtscp;lfence after it,
 * so that the loop cannot drift across the readings; its rate is measured
 * against CLOCK_MONOTONIC_RAW, not taken from a table.  clk_begin and
 * clk_end are inline, as they were when they lived in syscost.c: a call
 * around the timed loop would be part of what is timed.
 */
#ifndef SYSCOST_CLOCK_H
#define SYSCOST_CLOCK_H

#include <stdint.h>

enum clk { CLK_TSC, CLK_MONO };

/* The chosen clock, whether rdtscp exists, and ticks per second (1e9 for CLK_MONO). */
extern enum clk clk;
extern int have_rdtscp;
extern double tsc_hz;

uint64_t mono_ns(void);
/* This thread's exact on-CPU time (user + system), from the scheduler. */
uint64_t thread_cpu_ns(void);
double ticks_to_ns(uint64_t t);

/*
 * Choose the clock: asked is -1 (auto: the TSC if invariant), CLK_TSC or
 * CLK_MONO; a given rate (> 0) is used instead of measuring one over
 * calibrate_ms.  Returns why this clock, for the JSON's clock_why.
 */
const char *clock_choose(int asked, double given_hz, double calibrate_ms);

static inline uint64_t
tsc_begin(void)
{
	uint32_t lo, hi;

	/* lfence before: earlier work is done; after: the loop cannot start early. */
	__asm__ __volatile__("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t
tsc_end(void)
{
	uint32_t lo, hi, aux;

	if (have_rdtscp)	/* rdtscp waits for every earlier instruction */
		__asm__ __volatile__("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux) : : "memory");
	else
		__asm__ __volatile__("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi) : : "memory");
	(void)aux;
	return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t
clk_begin(void)
{
	return clk == CLK_TSC ? tsc_begin() : mono_ns();
}

static inline uint64_t
clk_end(void)
{
	return clk == CLK_TSC ? tsc_end() : mono_ns();
}

#endif
