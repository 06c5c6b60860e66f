/*
 * legs.c: the user side of a call's legs.  Each null call through the
 * linked mechanism is stamped just before its entry and just after its
 * return, on CLOCK_MONOTONIC read through the vDSO; a tracer (tw run's legs
 * stage: bpftrace on raw_syscalls:sys_enter and sys_exit) stamps the same
 * call in the kernel on the same clock (bpf_ktime_get_ns), and the two are
 * joined by order.  Then
 *
 *   way in  = sys_enter - before     (the entry, up to the tracepoint)
 *   body    = sys_exit  - sys_enter  (dispatch: the null call has no work)
 *   way out = after     - sys_exit   (the exit, back to user space)
 *
 * This program only stamps and prints; twtools.analyse.legs joins and checks.
 *
 * Why this clock pair: bpf_ktime_get_ns() is ktime_get_mono_fast_ns(), and
 * the vDSO's clock_gettime(CLOCK_MONOTONIC) computes the same timekeeper's
 * time from the same clocksource (the TSC here, read ordered by both), with
 * the same mult and shift, updated together at every timekeeping update.
 * They agree to a nanosecond or so.  A raw TSC in user space would need the
 * kernel's TSC-to-ns conversion on the BPF side, which bpftrace cannot read.
 * When the clocksource is not one the vDSO can read, clock_gettime falls
 * back to a system call: the stamps would then be system calls of their own
 * and land inside the legs, so a process without a vDSO is refused (77).
 *
 * Stamps have a cost: the clock read takes 15-30 ns, part of it before its
 * TSC read and part after.  What comes after the first stamp's read lands in
 * the way in, what comes before the second's in the way out; the whole of it
 * is measured as the empty bracket (two stamps around an empty call, per
 * batch) and printed.  Differences between mechanisms cancel it.
 *
 * Usage: see tw_usage below.  Output: one JSON object (docs/legs.md).
 * Exit 0 measured; 1 run-time error or a wrong result; 2 bad usage; 77 the
 * mechanism, or the vDSO clock, is not available here.
 */
#include <sys/auxv.h>

#include <err.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "cpu.h"
#include "json_out.h"
#include "tw_cli.h"
#include "tw_syscall.h"
#include "tw_sysnr.h"

#ifdef TW_ABI32
#define ABI_NAME "i386"
#else
#define ABI_NAME "x86_64"
#endif

#define MAX_CALLS	100000L
#define MAX_BATCHES	10000L
#define MAX_STAMPS	2000000L	/* calls * batches, at most */

typedef long (*call3_fn)(long, long, long, long);


const char tw_usage[] =
"usage: legs [-h] [--batches k] [--calls n] [--cpu n] [--shape ret|jmp]\n"
"            [--warmup n]\n"
"       legs --probe";

static void __attribute__((noreturn))
help(void)
{
	printf("%s\n\n", tw_usage);
	printf(
"Stamp each null system call through the '%s' mechanism (%d-bit) just before\n"
"its entry and just after its return, on CLOCK_MONOTONIC read through the vDSO,\n"
"for a tracer to join with its raw_syscalls stamps (tw run's legs stage).\n"
"\n"
"  --calls N    stamped calls per batch (default 100)\n"
"  --batches K  batches (default 10)\n"
"  --warmup N   unstamped calls first, through the same stub (default 2000)\n"
"  --cpu N      pin to CPU N; -1: do not pin (default: last allowed CPU)\n"
"  --shape S    ret: the stub called, returning by ret (default); jmp: leaving\n"
"               by an indirect jump\n"
"  --probe      exit 0 if the mechanism works here, else 77 with the reason\n"
"  -h, --help   this text\n"
"\n"
"The call is syscall number %d (no kernel has it: -ENOSYS after entry and\n"
"dispatch).  Exit: 0 measured, 1 run-time error or wrong result, 2 bad usage,\n"
"77 mechanism or vDSO clock unavailable.  Method and JSON: docs/legs.md.\n",
	    tw_mechanism, (int)(sizeof(void *) * 8), TW_NR_invalid);
	tw_help_exit();
}

/* An empty call with tw_syscall3's signature and an accepted result. */
__attribute__((noinline, noclone)) static long
empty_syscall3(long nr, long a1, long a2, long a3)
{
	long r = -ENOSYS;

	__asm__ __volatile__("" : "+r"(r) : "r"(nr), "r"(a1), "r"(a2), "r"(a3) : "memory");
	return r;
}

static inline uint64_t
stamp(void)
{
	struct timespec ts;

	/* glibc sends CLOCK_MONOTONIC to the vDSO (checked in main: AT_SYSINFO_EHDR) */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * ns per step of chain.h's multiply-add chain, on the stamps' own clock, just
 * before a batch: the core's clock at that moment (CHAIN_CYCLES cycles a step).
 * A KVM host moves a guest core's clock in steps of 3.7%, and a leg in ns
 * moves with it; the analysis brings every batch to one clock with this, as
 * syscost's batches are (docs/syscost.md, "The core's clock").  CHAIN_STEPS
 * steps take 5-8 us at 2-3.5 GHz; the two stamps around them, their fastest
 * of 16 empty pairs, are taken off.
 */
#define CHAIN_STEPS 16384

static unsigned long chain_sink;

static double
chain_step_ns(void)
{
	static uint64_t bracket = UINT64_MAX;

	return (double)chain_ticks(CHAIN_STEPS, stamp, stamp, &bracket, &chain_sink) /
	    CHAIN_STEPS;
}

/*
 * n calls of fn, each between two stamps, into before[] and after[]; the
 * number of results other than -ENOSYS comes back.
 */
__attribute__((noinline)) static long
stamped(call3_fn fn, long n, long long *before, long long *after)
{
	long i, bad = 0;

	__asm__ __volatile__("" : "+r"(fn));
	for (i = 0; i < n; i++) {
		uint64_t t0, t1;
		long r;

		t0 = stamp();
		r = fn(TW_NR_invalid, 0, 0, 0);
		t1 = stamp();
		before[i] = (long long)t0;
		after[i] = (long long)t1;
		bad += r != -ENOSYS;
	}
	return bad;
}

int
main(int argc, char **argv)
{
	static const char *const shapes[] = { "ret", "jmp" };	/* jmp: 0, 1 */
	long calls = 100, batches = 10, warmup = 2000, cpu = -2, k, i, n, bad;
	int jmp = 0, probe_only = 0;
	call3_fn fn;
	long long *before, *after, scratch[2];
	double *empty, *chain_ns;
	const struct tw_opt opts[] = {
		TW_LONG("calls", &calls, 1, MAX_CALLS),		/* per batch */
		TW_LONG("batches", &batches, 1, MAX_BATCHES),
		TW_LONG("warmup", &warmup, 0, 100000000L),	/* calls, untimed */
		TW_LONG("cpu", &cpu, -1, CPU_SETSIZE - 1),	/* -1: do not pin */
		TW_WORD("shape", &jmp, shapes, 2),
		TW_FLAG("probe", &probe_only),
		TW_OPTS_END
	};

	tw_options(argc, argv, opts, help);
	if (calls * batches > MAX_STAMPS)
		tw_usage_err("--calls times --batches is %ld, more than %ld stamped calls",
		    calls * batches, MAX_STAMPS);
	if (tw_nrs != NULL)
		tw_usage_err("the %s mechanism makes only some calls, not the null call: "
		    "it has no legs to stamp", tw_mechanism);
	if (jmp && tw_syscall3_jmp == NULL)
		tw_usage_err("--shape jmp: the %s mechanism has no such shape", tw_mechanism);
	tw_require_mechanism();
	if (getauxval(AT_SYSINFO_EHDR) == 0) {
		fprintf(stderr, "legs: %s: unsupported: no vDSO in this process (vdso=0?): "
		    "CLOCK_MONOTONIC would be a system call, inside the legs it times\n",
		    tw_mechanism);
		return TW_EXIT_UNSUPPORTED;
	}
	if (probe_only)
		return 0;

	if (cpu == -2)
		cpu = last_allowed_cpu();
	if (cpu >= 0)
		pin_cpu(cpu);
	fn = jmp ? tw_syscall3_jmp : tw_syscall3;
	n = calls * batches;
	before = tw_xcalloc(n, sizeof(*before));
	after = tw_xcalloc(n, sizeof(*after));
	empty = tw_xcalloc(batches, sizeof(*empty));
	chain_ns = tw_xcalloc(batches, sizeof(*chain_ns));

	/* The warm-up: the very calls, through the same stub, unstamped by the tracer's count. */
	for (i = 0; i < warmup; i++)
		if (fn(TW_NR_invalid, 0, 0, 0) != -ENOSYS)
			errx(1, "the null call through %s did not return -ENOSYS", tw_mechanism);
	bad = 0;
	for (k = 0; k < batches; k++) {
		long long sum = 0;

		/* The empty bracket: the same stamps around an empty call, no kernel entry. */
		for (i = 0; i < calls; i++) {
			(void)stamped(empty_syscall3, 1, &scratch[0], &scratch[1]);
			sum += scratch[1] - scratch[0];
		}
		empty[k] = (double)sum / (double)calls;
		chain_ns[k] = chain_step_ns();
		bad += stamped(fn, calls, before + k * calls, after + k * calls);
	}
	if (bad != 0)
		errx(1, "the null call through %s returned something other than -ENOSYS in "
		    "%ld of %ld calls", tw_mechanism, bad, n);

	printf("{\"program\": \"legs\", \"mechanism\": ");
	json_string(tw_mechanism);
	printf(", \"bits\": %d, \"abi\": \"%s\", \"pid\": %ld, \"cpu\": %ld, \"nr\": %d, "
	    "\"shape\": \"%s\", \"calls\": %ld, \"batches\": %ld, \"warmup\": %ld, "
	    "\"clock\": \"CLOCK_MONOTONIC (vDSO)\"", (int)(sizeof(void *) * 8), ABI_NAME,
	    (long)getpid(), cpu, TW_NR_invalid, jmp ? "jmp" : "ret", calls, batches, warmup);
	printf(", ");
	json_array("empty_ns", empty, batches, 2);
	printf(", \"chain_cycles_per_step\": %d, ", CHAIN_CYCLES);
	json_array("chain_ns_per_step", chain_ns, batches, 4);
	printf(", ");
	json_int_array("before_ns", before, n);
	printf(", ");
	json_int_array("after_ns", after, n);
	printf("}\n");
	tw_flush_stdout();
	return 0;
}
