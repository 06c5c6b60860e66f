/*
 * disturb.h: what disturbed a batch, read around it (outside its clock
 * readings): the thread's involuntary context switches (getrusage
 * RUSAGE_THREAD, ru_nivcsw), the pinned CPU's stolen time (/proc/stat, USER_HZ
 * ticks) and its interrupts (/proc/interrupts).  A batch with an involuntary
 * switch or stolen time is disturbed; syscost measures one more in its place.
 */
#ifndef SYSCOST_DISTURB_H
#define SYSCOST_DISTURB_H

struct counters {
	long nivcsw;
	long long steal, irqs;	/* -1: unreadable */
};

/*
 * Open /proc/stat and /proc/interrupts, kept open for the whole run, and say
 * whether CPU cpu's steal time and interrupts can be read there at all.
 */
void disturb_open(long cpu, int *have_steal, int *have_irqs);

/* The counters of CPU cpu, read before (after = 0) or after a timed window. */
void counters_read(struct counters *c, long cpu, int after);

#endif
