/*
 * output.h: one run's results, as syscost.c measures them and output.c
 * prints them.
 */
#ifndef SYSCOST_OUTPUT_H
#define SYSCOST_OUTPUT_H

#include "options.h"

/* One run: how it was set up, and per batch what was measured. */
struct run {
	long cpu;			/* pinned to; -1: not pinned */
	const char *clock_why;
	const char *sched;		/* "other" or "fifo" */
	char sched_why[160];
	long nr;			/* the call's number, as made */
	long lo, hi;			/* the results each call may give */
	const char *file;		/* what was written: NULL for no file */
	long long file_bytes;		/* its size afterwards; -1: not a file that is rewound */
	long calls, empty_calls;	/* per batch: timed, and in the empty loop */
	long measured, redone, ndisturbed;
	double loop_med;		/* the empty loop's median ns per call, subtracted */
	double bracket_ns;		/* CPU time of the bracket around a window */
	double *loop_ns, *raw_ns, *samples_ns, *offcpu_ns;
	double *chain_ns;		/* per batch: ns per step of chain.h's chain */
	long long *nivcsw, *steal, *irqs;
	int have_steal, have_irqs;
	unsigned char *disturbed;
};

/* The run as one line (--format table) or one JSON object. */
void print_table(const struct opts *o, const struct run *r);
void print_json(const struct opts *o, const struct run *r);

#endif
