/*
 * options.h: syscost's options, as options.c reads them from argv.
 */
#ifndef SYSCOST_OPTIONS_H
#define SYSCOST_OPTIONS_H

#include "clock.h"
#include "ops.h"
#include "speculation.h"

struct opts {
	int op;			/* enum op; -1: the default */
	enum shape shape;
	long size;		/* -1: the op's default */
	long calls;		/* 0: auto */
	long batches;
	long max_redo;		/* -1: as many as batches */
	long cpu;		/* -1: do not pin; -2: default (last allowed CPU) */
	int clock;		/* -1 auto, else enum clk */
	int table;
	double batch_ms, warmup_ms, calibrate_ms;
	double tsc_hz;		/* 0: measure */
	const char *file;
	int realtime;
	enum spec speculation;
	const char *seccomp;	/* --seccomp: a filter file, or NULL */
	long seccomp_times;	/* installed this many times over */
	long seccomp_flags;	/* --seccomp-flags: seccomp()'s flags word */
	long expect_errno;	/* --errno: the wall answers -N; 0: not asked */
	long nr;		/* --nr: the null op's number; -1: TW_NR_invalid */
};

/* argv into o, or exit 2 with a usage error; --probe sets *probe_only. */
void parse_args(int argc, char **argv, struct opts *o, int *probe_only);

#endif
