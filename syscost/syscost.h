/*
 * syscost.h: what options.c reads, syscost.c measures and output.c prints:
 * the operations and loop shapes, the options, and one run's results.
 */
#ifndef SYSCOST_H
#define SYSCOST_H

#include "clock.h"
#include "speculation.h"

#ifdef TW_ABI32
#define ABI_NAME "i386"
#else
#define ABI_NAME "x86_64"
#endif

enum op {
	OP_NULL, OP_GETPPID, OP_WRITE_DEVNULL, OP_WRITE_FILE, OP_WRITE_SYNC,
	OP_GETTIMEOFDAY, OP_CLOCK_GETTIME, OP_TIME, OP_CPUID, OP_COUNT
};
extern const char *const op_names[OP_COUNT];
/* The system call each operation makes. */
extern const long op_nrs[OP_COUNT];
/* cpuid makes no system call: its op_nrs entry is this, and any build can run it. */
#define TW_NR_NONE	(-2L)
#define OP_WRITES(op)	((op) == OP_WRITE_DEVNULL || (op) == OP_WRITE_FILE || \
			 (op) == OP_WRITE_SYNC)

#define MAX_CALLS	100000000L	/* calls per batch, at most */

enum shape { SHAPE_RET, SHAPE_JMP, SHAPE_INLINE, SHAPE_COUNT };
extern const char *const shape_names[SHAPE_COUNT];

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
};

/* One run: how it was set up, and per batch what was measured. */
struct run {
	long cpu;			/* pinned to; -1: not pinned */
	const char *clock_why;
	const char *sched;		/* "other" or "fifo" */
	char sched_why[160];
	long lo, hi;			/* the results each call may give */
	const char *file;		/* what was written: NULL for no file */
	long long file_bytes;		/* its size afterwards; -1: not a file that is rewound */
	long calls, empty_calls;	/* per batch: timed, and in the empty loop */
	long measured, redone, ndisturbed;
	double loop_med;		/* the empty loop's median ns per call, subtracted */
	double bracket_ns;		/* CPU time of the bracket around a window */
	double *loop_ns, *raw_ns, *samples_ns, *offcpu_ns;
	long long *nivcsw, *steal, *irqs;
	int have_steal, have_irqs;
	unsigned char *disturbed;
};

/* options.c: argv into o, or exit 2 with a usage error; --probe sets *probe_only. */
void parse_args(int argc, char **argv, struct opts *o, int *probe_only);

/* output.c: the run as one line (--format table) or one JSON object. */
void print_table(const struct opts *o, const struct run *r);
void print_json(const struct opts *o, const struct run *r);

#endif
