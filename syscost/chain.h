/*
 * chain.h: the core's clock, read in user space with no PMU.
 *
 * A chain of dependent multiply-adds, x = x * K + C, each step needing the
 * last, in a register the compiler is told it cannot see into (the empty
 * asm), so it neither vectorises nor folds the chain.  Each step is one
 * `imul` of the native word (3 cycles of latency) and one `add` (1 cycle) on
 * every x86 core of the last fifteen years, Intel's and AMD's alike (Agner
 * Fog's instruction tables; uops.info), so a step takes CHAIN_CYCLES cycles
 * of the core's clock, whatever that clock is, and ns per step is the
 * clock's period times CHAIN_CYCLES.  It touches no memory: caches, memory
 * and the kernel play no part; what shares the core (an SMT sibling) can.
 *
 * Why it exists: a KVM host moves a guest core's clock in steps (seen: 2.5,
 * 2.6, 2.7, 2.8 and 3.1 GHz on one Intel guest, each held for a minute or
 * more), and every figure in ns moves with it, 3.7% a step, while the
 * figure in cycles does not.  hostclock times it alone; syscost times it
 * before every batch, so each batch knows the clock it ran at.
 *
 * `unsigned long` is the native word: a 64-bit imul in a 64-bit build, a
 * 32-bit one in an i386 build (a 64-bit product there would be several
 * instructions and a different latency).
 */
#ifndef SYSCOST_CHAIN_H
#define SYSCOST_CHAIN_H

#include <stdint.h>

#define CHAIN_CYCLES 4

static inline unsigned long
chain(long n, unsigned long x)
{
	long i;

	for (i = 0; i < n; i++) {
		x = x * (unsigned long)6364136223846793005ULL +
		    (unsigned long)1442695040888963407ULL;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

/*
 * The clock ticks `steps` steps of the chain take between two reads of a
 * clock, begin() and end(), less the reads' own cost: *bracket holds their
 * fastest of 16 empty pairs, measured on the first call (UINT64_MAX until
 * then), so that CHAIN_CYCLES / (ns per step) is the core's clock.  *sink
 * carries the chain's value from call to call, so no call is dead code.
 * syscost reads its batches' clock (the TSC, fenced) and legs the vDSO's
 * CLOCK_MONOTONIC: each passes its own, inlined where this is.
 */
static inline uint64_t
chain_ticks(long steps, uint64_t (*begin)(void), uint64_t (*end)(void),
    uint64_t *bracket, unsigned long *sink)
{
	uint64_t t0, t1;
	int i;

	if (*bracket == UINT64_MAX)
		for (i = 0; i < 16; i++) {
			t0 = begin();
			t1 = end();
			if (t1 - t0 < *bracket)
				*bracket = t1 - t0;
		}
	t0 = begin();
	*sink = chain(steps, *sink | 1);
	t1 = end();
	return t1 - t0 > *bracket ? t1 - t0 - *bracket : t1 - t0;
}

#endif
