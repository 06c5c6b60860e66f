/*
 * hostclock: how fast the host runs user code right now, with no kernel entry.
 *
 *   hostclock [--batches k] [--iterations n]
 *	Times k batches (default 20) of n iterations (default 100000) of a
 *	chain of dependent multiply-adds, after one untimed batch, and prints
 *	each batch's nanoseconds.
 *
 * Why it exists: on a shared host a figure in nanoseconds moves between
 * runs, and the first question is whether the core itself ran slower.  The
 * sweeps run hostclock once per round, so that a figure's move between two
 * runs can be set beside the host's own move, measured where no mechanism,
 * no file system and no kernel is involved.  On an AMD EPYC (Zen 5) KVM
 * guest, over two pairs of back-to-back sweep runs, it moved 0.02% in one
 * pair while the write cells moved 0.65-1.19% as a whole, and 0.6-1.5% in
 * the other, with the cells: either the write path or the core can move.
 *
 * The loop is chain.h's, the one syscost times before every batch: its
 * time is the core's multiply-add latency times n, a measure of the core's
 * clock and of what shares the core (an SMT sibling), not of caches or
 * memory.
 *
 * Timing: CLOCK_MONOTONIC_RAW around each batch.  The default batch is tens
 * of microseconds, short against a timer tick, so most batches run
 * uninterrupted; the analysis takes the fastest ones.
 *
 * Output: one JSON object on stdout.  Exit 2 on bad usage, 1 on a run-time
 * error.  Numbers on the command line are read by tw_cli.c.
 */
#include <err.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "chain.h"
#include "json_out.h"
#include "tw_cli.h"

#define MAX_BATCHES	100000
#define MAX_ITERATIONS	1000000000L

const char tw_usage[] =
    "usage: hostclock [--batches k] [--iterations n]\n"
    "       hostclock -h";

enum { OPT_BATCHES = TW_LONGOPT, OPT_ITERATIONS };

static const struct option opts[] = {
	{ "batches", required_argument, NULL, OPT_BATCHES },
	{ "iterations", required_argument, NULL, OPT_ITERATIONS },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static void
help(void)
{
	printf("%s\n\n", tw_usage);
	printf(
"Time k batches of n dependent multiply-adds in user space (no system call,\n"
"no memory) and print each batch's nanoseconds as JSON: the host's speed\n"
"for user code, beside which a figure's move between runs can be read.\n"
"\n"
"  --batches K      timed batches (default 20), after one untimed batch\n"
"  --iterations N   multiply-adds per batch (default 100000)\n"
"  -h, --help       print this help and exit\n");
	exit(0);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC_RAW, &ts) == -1)
		err(1, "clock_gettime(CLOCK_MONOTONIC_RAW)");
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int
main(int argc, char *argv[])
{
	long batches = 20, iterations = 100000, b;
	unsigned long x = 1;
	uint64_t t0;
	double *ns;
	int ch;

	while ((ch = tw_getopt(argc, argv, ":h", opts, 0, help)) != -1) {
		switch (ch) {
		case OPT_BATCHES:
			batches = tw_int_arg("--batches", optarg, 1, MAX_BATCHES);
			break;
		case OPT_ITERATIONS:
			iterations = tw_int_arg("--iterations", optarg, 1,
			    MAX_ITERATIONS);
			break;
		}
	}
	if ((ns = calloc((size_t)batches, sizeof(*ns))) == NULL)
		err(1, "calloc");

	/* The untimed batch: the page of the loop and the clock's vDSO page
	 * are faulted in, and the core leaves any idle state, before timing. */
	x = chain(iterations, x);
	for (b = 0; b < batches; b++) {
		t0 = now_ns();
		x = chain(iterations, x);
		ns[b] = (double)(now_ns() - t0);
	}

	printf("{\"schema\":\"timewrite-hostclock/1\",\"iterations\":%ld,"
	    "\"clock\":\"CLOCK_MONOTONIC_RAW\",", iterations);
	json_array("batch_ns", ns, batches, 0);
	/* The chain's last value: printed so no compiler can drop the loop. */
	printf(",\"check\":%llu}\n", (unsigned long long)(x & 0xffff));
	free(ns);
	return 0;
}
