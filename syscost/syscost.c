/*
 * syscost.c: what one system call costs through the linked mechanism.
 *
 * Usage: see tw_usage below (the README gives the same synopsis).
 *
 * Like timewrite, this file is written once and linked against one
 * mechanism (variants/registry): every timed call goes through the
 * mechanism's stub (tw_syscall.h) and every buffer the kernel reads comes
 * from tw_alloc(), so the same loop measures int 0x80, sysenter, syscall,
 * the vsyscall page, the vDSOs or glibc.
 *
 * Method, and why:
 *
 * - Batches, not single calls.  A call costs 50 ns to a few µs; reading a
 *   clock costs 10-30 ns and has its own granularity, so one call per reading
 *   would mostly measure the clock.  Each batch runs N calls between two
 *   clock readings, with N chosen (unless --calls) so that a batch lasts at
 *   least --batch-ms (1 ms): the two readings are then < 0.01% of it.  K
 *   batches give K samples of ns per call, so the caller can state a spread
 *   and a confidence interval instead of one number.
 *
 * - The TSC when it is invariant (CPUID 0x80000007 EDX bit 8: it ticks at a
 *   constant rate through frequency changes and idle states), read as
 *   lfence;rdtsc before and rdtscp;lfence after, so that the loop cannot
 *   drift across the readings.  Its rate is measured here against
 *   CLOCK_MONOTONIC_RAW over --calibrate-ms (50 ms) and reported, not taken
 *   from a table.  Without an invariant TSC (or with --clock monotonic),
 *   clock_gettime(CLOCK_MONOTONIC_RAW) is used instead; it is slower to read
 *   but the batch length makes that irrelevant.
 *
 * - Loop shapes (--shape, tw_syscall.h).  ret: the timed loop calls
 *   tw_syscall3 through a function pointer the compiler cannot see through,
 *   and checks every result; this is how libc's wrappers are called.  jmp:
 *   the same loop calling tw_syscall3_jmp, the same stub leaving by an
 *   indirect jump, which the return-stack predictor has no say in.  inline:
 *   the stub's own loop, tw_loop3, with the entry instruction in it.
 *
 * - Loop subtraction.  The same loop with the entry replaced by something
 *   that gives an accepted result without entering the kernel (for ret and
 *   jmp: a call to an empty function with tw_syscall3's signature; for
 *   inline: the stub's tw_loop3_empty, identical but for the entry) is timed
 *   before each batch (at least 20000 calls); the median of its cost per
 *   call (loop_ns_per_call: about 2 ns for an indirect call and return, a
 *   fraction of that inline) is subtracted from every batch.  What remains is
 *   the mechanism's stub plus the kernel's entry, dispatch, work and exit.
 *   The raw figures are reported as well.
 *
 * - Pinning.  The process is pinned to one CPU (--cpu, default the last
 *   allowed one) so that a migration cannot land inside a batch and the TSC
 *   is read on a single core throughout.
 *
 * - --realtime: SCHED_FIFO (priority 50) for the run, so that no ordinary
 *   process can preempt a batch.  On a loaded machine this turns a CV of
 *   100% or more (batches stretched by other processes' time slices) into a
 *   few percent.  It needs root or CAP_SYS_NICE; without it the run goes on
 *   under SCHED_OTHER and the JSON says why ("sched", "sched_why").  The
 *   kernel's RT throttling (sched_rt_runtime_us) still bounds the CPU taken.
 *
 * - Disturbance, per batch.  Around each timed batch (outside its clock
 *   readings) syscost reads the thread's involuntary context switches
 *   (getrusage RUSAGE_THREAD, ru_nivcsw), the pinned CPU's stolen time
 *   (/proc/stat, USER_HZ ticks) and its interrupts (/proc/interrupts).  A
 *   batch with an involuntary switch or stolen time is disturbed: it is
 *   kept and flagged, and one more batch is measured in its place, up to
 *   --max-redo, so that about --batches undisturbed ones remain.
 *
 * - Warm-up.  At least --warmup-ms (20 ms) of the very calls being measured
 *   run before the first batch: caches, branch predictors, the page cache
 *   pages of the output file and the CPU clock all reach their steady state.
 *
 * - Every result is checked against the range the operation accepts (one
 *   value for most: -ENOSYS for null, the parent's pid, the size written, 0
 *   for the clock reads; a window of an hour for time).  One wrong result
 *   anywhere stops the run with exit 1; a cost of a call that did not do its
 *   work is no cost.
 *
 * - --speculation: switch a per-process speculation mitigation on for this
 *   process (prctl) before measuring, so that one session can alternate it.
 *
 * Operations:
 *   null           an invalid syscall number (TW_NR_invalid): entry, dispatch
 *                  and exit, no work; the kernel answers -ENOSYS
 *   getppid        the classic cheapest real call (what perf bench uses)
 *   write-devnull  write --size bytes (1) to /dev/null: the write path
 *                  without a file system
 *   write-file     write --size bytes (256) to a regular file: page-cache
 *                  copy.  The file is rewound (lseek, untimed) before every
 *                  batch and every warm-up pass, so measured calls overwrite
 *                  cached pages of a file that ends calls_per_batch * size
 *                  bytes long; no timed call allocates blocks.  A batch
 *                  writes at most FILE_SPAN bytes (calls capped at
 *                  FILE_SPAN / size), so the pages it overwrites stay in
 *                  the core's own cache and the figure is the call's, not
 *                  the host's memory's (docs/syscost.md)
 *   write-sync     the same with O_SYNC: every call waits for the device
 *   gettimeofday   gettimeofday(tv, NULL): 0
 *   clock_gettime  clock_gettime(CLOCK_MONOTONIC, &ts): 0
 *   time           time(NULL): the time, within an hour of the start
 *   cpuid          no system call: cpuid leaf 0 in the mechanism's place,
 *                  the price of one VM exit in a guest (cpuid_call3)
 *   verw, lfence   no system call: a mitigation's own instruction from user
 *                  space (verw_call3, lfence_call3), the lower bound of its
 *                  price on the kernel's way out or in
 * The last three are what the vsyscall page and the 64-bit vDSO can do;
 * those mechanisms refuse the others (tw_nrs), and every other mechanism
 * enters the kernel for them.
 *
 * The pieces: this file sets up and measures, and main reads parse, probe,
 * measure, print; options.c parses the command line, clock.c chooses and
 * calibrates the clock, disturb.c reads the disturbance counters,
 * speculation.c applies --speculation, output.c prints the run, ops.c holds
 * the operations' tables; ops.h, options.h and output.h are what they share.
 * The median is timewrite/tw_stats.c's.
 *
 * Output: one JSON object (docs/syscost.md has the schema) or one line.
 * Exit 0 measured; 1 run-time error or a wrong syscall result; 2 bad usage;
 * 77 the mechanism, or the asked speculation setting, is not available here
 * (the reason is on stderr).
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chain.h"
#include "clock.h"
#include "cpu.h"
#include "disturb.h"
#include "speculation.h"
#include "ops.h"
#include "options.h"
#include "output.h"
#include "tw_cli.h"
#include "tw_stats.h"
#include "tw_syscall.h"
#include "tw_sysnr.h"
#include "wall.h"

#define EMPTY_MIN_CALLS	20000L	/* the empty loop runs at least this many */
/*
 * write-file's batch overwrites at most this many bytes of its file: 128 KiB,
 * half of the smallest L2 of the x86 cores timewrite meets (256 KiB on Intel's
 * client cores since Haswell; 512 KiB on AMD Zen 1-3, 1-2 MiB since).  With the
 * 1 ms batches' own size, a 4 KiB write's batch spanned 2.5-4.9 MiB, and its
 * floor followed the host's last-level cache: on an Intel family 6 model 207
 * guest 455-479 ns a process on a quiet host and 370 or 490 ns for whole runs
 * beside the neighbour, where 32 calls a batch (128 KiB) gave 365-369 ns in
 * every quiet process.
 */
#define FILE_SPAN	(128L * 1024)
#define TIME_WINDOW	3600	/* time: accepted up to this long after the start */

typedef long (*call3_fn)(long, long, long, long);
typedef long (*loop_fn)(struct tw_loop *, long);

/* ---- the timed loops ----------------------------------------------------- */

/* The call every batch makes, and the results it accepts. */
static struct tw_loop call;
static enum shape shape;
static call3_fn shape_fn;	/* ret and jmp: the stub the C loop calls */

/*
 * The empty loop's callee for the ret and jmp shapes: tw_syscall3's
 * signature, no kernel entry, an accepted result.  It is only ever called
 * through a pointer the compiler cannot follow (run_calls), so neither the
 * call nor the loop around it can be optimised away.
 */
__attribute__((noinline, noclone)) TW_TIMED_CODE static long
empty_syscall3(long nr, long a1, long a2, long a3)
{
	long r = call.lo;

	__asm__ __volatile__("" : "+r"(r) : "r"(nr), "r"(a1), "r"(a2), "r"(a3) : "memory");
	return r;
}

/*
 * The cpuid op: the cpuid instruction (leaf 0) in place of the mechanism's
 * entry, with tw_syscall3's signature so that the same loop times it.  cpuid
 * is not a system call.  It is here because a hypervisor must intercept it:
 * VMX exits on every cpuid unconditionally, and KVM on SVM intercepts it too,
 * so in a guest one cpuid is one VM exit and back, and its cost is the price
 * of an exit on this host (the cost model of `tw explain` divides by it).  On
 * bare metal it costs a few hundred cycles and no exit.  Leaf 0 returns the
 * highest standard leaf in eax, which is the result checked.
 */
__attribute__((noinline, noclone)) TW_TIMED_CODE static long
cpuid_call3(long nr, long a1, long a2, long a3)
{
	unsigned int a = 0, b, c = 0, d;

	(void)nr, (void)a1, (void)a2, (void)a3;
	__asm__ __volatile__("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d) : : "memory");
	return (long)a;
}

/*
 * The verw op: VERW with a memory operand holding a valid selector, the user
 * data segment (0x2b, __USER_DS, in 64-bit and in 32-bit processes of an
 * x86-64 kernel).  It is the instruction the kernel's CLEAR_CPU_BUFFERS runs
 * on every exit to user where MDS, TAA, MMIO, RFDS or TSA is mitigated
 * (arch/x86/include/asm/nospec-branch.h: `verw mds_verw_sel`, a kernel
 * selector); on a CPU whose microcode gave VERW that work (MD_CLEAR, or AMD's
 * VERW_CLEAR) it overwrites the same buffers from user space.  Its price here
 * is a lower bound of the kernel's: the buffers it clears hold less after a
 * user loop than after a system call's work.  It sets ZF for a writable
 * segment: the result checked is 1.
 */
__attribute__((noinline, noclone)) TW_TIMED_CODE static long
verw_call3(long nr, long a1, long a2, long a3)
{
	static const unsigned short sel = 0x2b;
	unsigned char zf;

	(void)nr, (void)a1, (void)a2, (void)a3;
	__asm__ __volatile__("verw %1\n\tsetz %0" : "=q"(zf) : "m"(sel) : "cc", "memory");
	return (long)zf;
}

/*
 * The lfence op: one LFENCE, the speculation barrier the kernel puts on its
 * entry paths for spectre_v1's swapgs variant (FENCE_SWAPGS_USER_ENTRY, 
 * FENCE_SWAPGS_KERNEL_ENTRY) and after bounds checks (barrier_nospec).  Its
 * price in a user loop is a lower bound of what it costs on the way in, where
 * it waits for the loads before it.  Returns 1, the result checked.
 */
__attribute__((noinline, noclone)) TW_TIMED_CODE static long
lfence_call3(long nr, long a1, long a2, long a3)
{
	(void)nr, (void)a1, (void)a2, (void)a3;
	__asm__ __volatile__("lfence" : : : "memory");
	return 1;
}

/*
 * The ret and jmp shapes: n calls of fn, each result checked; returns clock
 * ticks.  The first wrong result and the number of wrong results come back
 * through bad/first.
 */
__attribute__((noinline)) TW_TIMED_CODE static uint64_t
run_calls(call3_fn fn, const struct tw_loop *c, long n, long *bad, long *first)
{
	long nr = c->nr, a1 = c->a1, a2 = c->a2, a3 = c->a3, lo = c->lo, hi = c->hi;
	long i, nbad = 0, r0 = 0;
	uint64_t t0, t1;

	/* Hide which function fn is: the same machine code times both loops. */
	__asm__ __volatile__("" : "+r"(fn));
	t0 = clk_begin();
	for (i = 0; i < n; i++) {
		long r = fn(nr, a1, a2, a3);

		if (__builtin_expect(r < lo || r > hi, 0) && nbad++ == 0)
			r0 = r;
	}
	t1 = clk_end();
	*bad = nbad;
	*first = r0;
	return t1 - t0;
}

/* The inline shape: the stub's own loop (tw_loop3 or tw_loop3_empty). */
__attribute__((noinline)) TW_TIMED_CODE static uint64_t
run_loop(loop_fn loop, struct tw_loop *c, long n, long *bad, long *first)
{
	uint64_t t0, t1;
	long nbad;

	__asm__ __volatile__("" : "+r"(loop));
	t0 = clk_begin();
	nbad = loop(c, n);
	t1 = clk_end();
	*bad = nbad;
	*first = c->first_bad;
	return t1 - t0;
}

/* ---- helpers ------------------------------------------------------------- */

static const char *
result_text(long r, char *buf, size_t len)
{
	if (r < 0 && r > -4096)
		snprintf(buf, len, "%ld (%s)", r, strerror((int)-r));
	else
		snprintf(buf, len, "%ld", r);
	return buf;
}

/* ---- the measurement ----------------------------------------------------- */

struct target {
	int fd;			/* -1 for the ops that write nothing */
	int rewind;		/* lseek back to 0 before each pass */
	char path[PATH_MAX];
	int temp;		/* a temporary file, already unlinked */
};

static struct target tgt = { .fd = -1 };

static void
rewind_target(void)
{
	if (tgt.rewind && lseek(tgt.fd, 0, SEEK_SET) == -1)
		err(1, "lseek %s", tgt.path);
}

/*
 * --file PATH: a regular file syscost opens itself, never what a link points
 * to, nor a FIFO or device.  O_NOFOLLOW refuses a symbolic link (ELOOP) before
 * anything is created through it; O_NONBLOCK keeps a FIFO without a reader from
 * hanging the open (ENXIO), and one with a reader is refused by the S_ISREG
 * check below.  Only then is the file truncated, so a refusal changes nothing.
 */
static void
open_file_target(int flags)
{
	struct stat st;
	int fl;

	tgt.fd = open(tgt.path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | flags,
	    0644);
	if (tgt.fd == -1 && errno == ELOOP)
		errx(1, "--file %s: a symbolic link; syscost writes only to a regular file, "
		    "not through a link", tw_quote(tgt.path));
	if (tgt.fd == -1 && errno == ENXIO)
		errx(1, "--file %s: not a regular file (a FIFO or socket)", tw_quote(tgt.path));
	if (tgt.fd == -1)
		err(1, "open %s", tw_quote(tgt.path));
	if (fstat(tgt.fd, &st) == -1)
		err(1, "fstat %s", tw_quote(tgt.path));
	if (!S_ISREG(st.st_mode))
		errx(1, "--file %s: not a regular file (a %s)", tw_quote(tgt.path),
		    S_ISFIFO(st.st_mode) ? "FIFO" : S_ISCHR(st.st_mode) ? "character device" :
		    S_ISBLK(st.st_mode) ? "block device" : S_ISSOCK(st.st_mode) ? "socket" :
		    "special file");
	/* Back to blocking writes, which is what the measured write(2) must be. */
	if ((fl = fcntl(tgt.fd, F_GETFL)) == -1 || fcntl(tgt.fd, F_SETFL, fl & ~O_NONBLOCK) == -1)
		err(1, "fcntl %s", tgt.path);
	if (ftruncate(tgt.fd, 0) == -1)
		err(1, "truncate %s", tgt.path);
}

static void
open_target(const struct opts *o)
{
	int flags = o->op == OP_WRITE_SYNC ? O_SYNC : 0;

	if (o->op == OP_WRITE_DEVNULL) {
		snprintf(tgt.path, sizeof(tgt.path), "/dev/null");
		if ((tgt.fd = open(tgt.path, O_WRONLY | O_CLOEXEC)) == -1)
			err(1, "open %s", tgt.path);
		return;
	}
	tgt.rewind = 1;
	if (o->file != NULL) {
		if (strlen(o->file) >= sizeof(tgt.path))
			tw_usage_err("--file: the path is longer than %zu bytes",
			    sizeof(tgt.path) - 1);
		snprintf(tgt.path, sizeof(tgt.path), "%s", o->file);
		open_file_target(flags);
		return;
	}
	snprintf(tgt.path, sizeof(tgt.path), "syscost.%ld.XXXXXX", (long)getpid());
	if ((tgt.fd = mkostemp(tgt.path, O_CLOEXEC | flags)) == -1)
		err(1, "cannot create a temporary file in the current directory "
		    "(use --file PATH)");
	tgt.temp = 1;
	/* Unlinked at once: the open fd keeps it, and no kill can leave it behind. */
	if (unlink(tgt.path) == -1)
		err(1, "unlink %s", tgt.path);
}

/*
 * Ticks of one batch of n calls in the chosen shape, or of its empty twin;
 * any wrong result ends the run.
 */
static uint64_t
timed(int empty, long n, const char *what)
{
	long bad, first;
	uint64_t t;
	char buf[96], want[96];

	rewind_target();
	if (shape == SHAPE_INLINE)
		t = run_loop(empty ? tw_loop3_empty : tw_loop3, &call, n, &bad, &first);
	else
		t = run_calls(empty ? empty_syscall3 : shape_fn, &call, n, &bad, &first);
	if (bad != 0) {
		if (call.lo == call.hi)
			snprintf(want, sizeof(want), "instead of %ld", call.lo);
		else
			snprintf(want, sizeof(want), "outside [%ld, %ld]", call.lo, call.hi);
		errx(1, "%s through %s (shape %s) returned %s %s in %ld of %ld calls",
		    empty ? "the empty loop" : what, tw_mechanism, shape_names[shape],
		    result_text(first, buf, sizeof(buf)), want, bad, n);
	}
	return t;
}

/*
 * CPU time a batch's bracket spends outside its timed window: the two
 * CPU-clock reads (system calls), write-file's rewind and the loop's own
 * setup.  The median over 21 brackets of one empty call is taken off every
 * batch's CPU time, so that off-CPU time is ~0 for calls that never sleep;
 * how much one batch's bracket differs from it (up to about its size) is the
 * resolution of that batch's off-CPU figure, spread over its calls.
 */
#define BRACKET_TRIALS	21
static double
cpu_bracket_ns(void)
{
	double v[BRACKET_TRIALS];
	uint64_t cpu0, cpu1, t;
	int i;

	for (i = 0; i < BRACKET_TRIALS; i++) {
		cpu0 = thread_cpu_ns();
		t = timed(1, 1, NULL);
		cpu1 = thread_cpu_ns();
		v[i] = (double)(cpu1 - cpu0) - ticks_to_ns(t);
	}
	return tw_median(v, BRACKET_TRIALS);
}

/* Calls per batch so that one batch lasts at least target_ns. */
static long
autosize(double target_ns, long max_calls, const char *what)
{
	long n = 1;

	for (;;) {
		double ns = ticks_to_ns(timed(0, n, what));
		double want;

		if (ns >= target_ns || n >= max_calls)
			return n;
		/* Grow 2..10x per step: a lucky first call must not overshoot. */
		want = ns > 0 ? target_ns / (ns / (double)n) * 1.1 + 1 : (double)n * 10;
		if (want > (double)n * 10)
			want = (double)n * 10;
		if (want < (double)n * 2)
			want = (double)n * 2;
		n = want > (double)max_calls ? max_calls : (long)want;
	}
}

/* ---- set-up and measurement ---------------------------------------------- */

/*
 * Everything before the first timed call: the speculation setting, the CPU,
 * the scheduler, the clock, and the call with the results that prove it did
 * its work.  what names the call in messages.
 */
static void
prepare(const struct opts *o, struct run *r, char *what, size_t whatlen)
{
	char *buf;
	time_t now;

	shape = o->shape;
	shape_fn = o->op == OP_CPUID ? cpuid_call3 : o->op == OP_VERW ? verw_call3 :
	    o->op == OP_LFENCE ? lfence_call3 :
	    shape == SHAPE_JMP ? tw_syscall3_jmp : tw_syscall3;
	/* Before the clock is calibrated: the setting may slow this process. */
	if (o->speculation != SPEC_NONE)
		speculation_apply(o->speculation);

	/* Pin first: the TSC is then read and calibrated on one core. */
	r->cpu = o->cpu == -2 ? last_allowed_cpu() : o->cpu;
	if (r->cpu >= 0)
		pin_cpu(r->cpu);
	r->sched = "other";
	snprintf(r->sched_why, sizeof(r->sched_why), "not asked for (--realtime)");
	if (o->realtime) {
		struct sched_param sp = { .sched_priority = 50 };

		if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) {
			r->sched = "fifo";
			snprintf(r->sched_why, sizeof(r->sched_why), "SCHED_FIFO priority 50");
		} else
			snprintf(r->sched_why, sizeof(r->sched_why),
			    "SCHED_FIFO refused (%s): ordinary processes may preempt batches",
			    strerror(errno));
	}
	r->clock_why = clock_choose(o->clock, o->tsc_hz, o->calibrate_ms);

	memset(&call, 0, sizeof(call));
	call.nr = o->nr != -1 ? o->nr : op_nrs[o->op];
	switch (o->op) {
	case OP_NULL:
		call.lo = call.hi = -ENOSYS;
		break;
	case OP_GETPPID:
		call.lo = call.hi = (long)getppid();
		break;
	case OP_WRITE_DEVNULL:
	case OP_WRITE_FILE:
	case OP_WRITE_SYNC:
		/* Kept for the whole run: every batch writes it again. */
		if ((buf = tw_alloc((size_t)o->size)) == NULL)
			err(1, "tw_alloc(%ld) for the %s mechanism", o->size, tw_mechanism);
		memset(buf, 'x', (size_t)o->size);
		open_target(o);
		call.a1 = tgt.fd;
		call.a2 = (long)buf;
		call.a3 = o->size;
		call.lo = call.hi = o->size;
		break;
	case OP_GETTIMEOFDAY:
		/* Room for either ABI's struct timeval; the time zone is not asked. */
		if ((buf = tw_alloc(64)) == NULL)
			err(1, "tw_alloc(64) for the %s mechanism", tw_mechanism);
		call.a1 = (long)buf;
		call.lo = call.hi = 0;
		break;
	case OP_CLOCK_GETTIME:
		if ((buf = tw_alloc(64)) == NULL)
			err(1, "tw_alloc(64) for the %s mechanism", tw_mechanism);
		call.a1 = CLOCK_MONOTONIC;
		call.a2 = (long)buf;
		call.lo = call.hi = 0;
		break;
	case OP_CPUID:
		/* The highest standard leaf, as the timed calls must return it. */
		call.lo = call.hi = cpuid_call3(0, 0, 0, 0);
		break;
	case OP_VERW:
	case OP_LFENCE:
		/* ZF set by VERW of a writable segment; lfence's own 1. */
		call.lo = call.hi = 1;
		break;
	case OP_TIME:
		if ((now = time(NULL)) == (time_t)-1)
			err(1, "time");
		call.lo = (long)now;
		call.hi = (long)now + TIME_WINDOW;
		break;
	default:
		abort();
	}
	/*
	 * The wall goes up last: everything above (the target file's open, the
	 * results computed from this process's own calls) is set-up, not what is
	 * measured, and the calibration reads the clock without a system call.
	 * A wall that answers the call itself (SECCOMP_RET_ERRNO) gives -N.
	 */
	if (o->seccomp != NULL)
		wall_seccomp_install(o->seccomp, o->seccomp_times, o->seccomp_flags);
	if (o->expect_errno != 0)
		call.lo = call.hi = -o->expect_errno;
	r->lo = call.lo;
	r->hi = call.hi;
	r->nr = call.nr;
	if (o->nr != -1)
		snprintf(what, whatlen, "syscall(%ld)", o->nr);
	else
	snprintf(what, whatlen, "%s", o->op == OP_NULL ? "syscall(TW_NR_invalid)" :
	    OP_WRITES(o->op) ? "write()" : o->op == OP_GETPPID ? "getppid()" :
	    o->op == OP_GETTIMEOFDAY ? "gettimeofday()" :
	    o->op == OP_CLOCK_GETTIME ? "clock_gettime()" :
	    o->op == OP_CPUID ? "cpuid (leaf 0)" : o->op == OP_VERW ? "verw (selector 0x2b)" :
	    o->op == OP_LFENCE ? "lfence" : "time()");
}

/*
 * ns per step of chain.h's multiply-add chain, timed on the batches' clock
 * just before a batch: the core's clock at that moment (CHAIN_CYCLES cycles a
 * step), so that the analysis can tell a host that slowed the core's clock
 * from one whose neighbours got in the way.  CHAIN_STEPS steps take 4-7 us
 * at 2-3.5 GHz: short against the 0.5-1 ms batch beside it.  The two clock
 * readings around it (fenced: some tens of cycles) are taken off, their
 * fastest of 16 empty brackets, so that 4 / (ns per step) is the clock in GHz.
 */
#define CHAIN_STEPS 4096

static unsigned long chain_sink;

static double
chain_step_ns(void)
{
	static uint64_t bracket = UINT64_MAX;

	return ticks_to_ns(chain_ticks(CHAIN_STEPS, clk_begin, clk_end, &bracket,
	    &chain_sink)) / CHAIN_STEPS;
}

/*
 * The warm-up, then the batches, each with its empty loop, its off-CPU time
 * and its disturbance counters, and one more batch for each disturbed one
 * while --max-redo allows; then the samples, the empty loop subtracted.
 */
static void
measure(const struct opts *o, struct run *r, const char *what)
{
	long k, n, nmax, max_calls;
	uint64_t t0;
	double t_ns;
	struct stat st;

	max_calls = o->op == OP_WRITE_FILE && o->size > 0 ?
	    (FILE_SPAN / o->size > 0 ? FILE_SPAN / o->size : 1) : MAX_CALLS;
	r->calls = n = o->calls ? o->calls : autosize(o->batch_ms * 1e6, max_calls, what);

	/*
	 * Warm-up passes of exactly n calls, so that the file (write-file/-sync)
	 * is n * size bytes when the first batch overwrites it.
	 */
	if (tgt.rewind && ftruncate(tgt.fd, 0) == -1)
		err(1, "ftruncate %s", tgt.path);
	t0 = mono_ns();
	do
		(void)timed(0, n, what);
	while ((double)(mono_ns() - t0) < o->warmup_ms * 1e6);

	nmax = o->batches + o->max_redo;
	r->loop_ns = tw_xcalloc(nmax, sizeof(double));
	r->chain_ns = tw_xcalloc(nmax, sizeof(double));
	r->raw_ns = tw_xcalloc(nmax, sizeof(double));
	r->samples_ns = tw_xcalloc(nmax, sizeof(double));
	r->offcpu_ns = tw_xcalloc(nmax, sizeof(double));
	r->nivcsw = tw_xcalloc(nmax, sizeof(long long));
	r->steal = tw_xcalloc(nmax, sizeof(long long));
	r->irqs = tw_xcalloc(nmax, sizeof(long long));
	r->disturbed = tw_xcalloc(nmax, 1);
	disturb_open(r->cpu, &r->have_steal, &r->have_irqs);
	r->empty_calls = n > EMPTY_MIN_CALLS ? n : EMPTY_MIN_CALLS;
	r->bracket_ns = cpu_bracket_ns();
	r->redone = r->ndisturbed = 0;
	for (k = 0, r->measured = o->batches; k < r->measured; k++) {
		uint64_t cpu0, cpu1;
		struct counters c0, c1;

		r->loop_ns[k] = ticks_to_ns(timed(1, r->empty_calls, NULL)) /
		    (double)r->empty_calls;
		r->chain_ns[k] = chain_step_ns();
		/*
		 * Off-CPU time: the timed window minus the CPU time spent in it.
		 * CLOCK_THREAD_CPUTIME_ID is the scheduler's exact run time (user
		 * + system), not getrusage's tick-sampled split, so for an O_SYNC
		 * write this is the wait for the device, in the very calls that
		 * are timed.  The CPU clock can only be read around the window,
		 * so the CPU time of the bracket itself (measured once, above) is
		 * taken off; a preemption outside the window adds no CPU time
		 * and so cannot leak in.  The disturbance counters are read
		 * around that bracket, outside the window.
		 */
		counters_read(&c0, r->cpu, 0);
		cpu0 = thread_cpu_ns();
		t_ns = ticks_to_ns(timed(0, n, what));
		cpu1 = thread_cpu_ns();
		counters_read(&c1, r->cpu, 1);
		r->raw_ns[k] = t_ns / (double)n;
		r->offcpu_ns[k] = (t_ns - ((double)(cpu1 - cpu0) - r->bracket_ns)) /
		    (double)n;
		r->nivcsw[k] = c1.nivcsw - c0.nivcsw;
		r->steal[k] = r->have_steal && c0.steal >= 0 && c1.steal >= 0 ?
		    c1.steal - c0.steal : 0;
		r->irqs[k] = r->have_irqs && c0.irqs >= 0 && c1.irqs >= 0 ?
		    c1.irqs - c0.irqs : 0;
		r->disturbed[k] = r->nivcsw[k] > 0 || r->steal[k] > 0;
		if (r->disturbed[k]) {
			r->ndisturbed++;
			if (r->redone < o->max_redo) {
				r->redone++;
				r->measured++;
			}
		}
	}
	/*
	 * Subtract the median empty-loop cost, not each batch's own: an
	 * interrupt landing in one short empty batch must not bend the sample
	 * beside it.
	 */
	r->loop_med = tw_median(r->loop_ns, r->measured);
	for (k = 0; k < r->measured; k++)
		r->samples_ns[k] = r->raw_ns[k] - r->loop_med;

	r->file = !OP_WRITES(o->op) ? NULL : tgt.temp ? "(temporary, removed)" : tgt.path;
	r->file_bytes = -1;
	if (tgt.rewind) {
		if (fstat(tgt.fd, &st) == -1)
			err(1, "fstat %s", tgt.path);
		r->file_bytes = (long long)st.st_size;
	}
	if (tgt.fd != -1 && close(tgt.fd) == -1)
		err(1, "close %s", tgt.path);	/* the data may only fail here */
}

/* ---- main ------------------------------------------------------------------ */

int
main(int argc, char **argv)
{
	struct opts o = {
		.op = -1, .shape = SHAPE_RET, .size = -1, .calls = 0,
		.batches = 10, .max_redo = -1, .cpu = -2, .clock = -1, .table = 0,
		.batch_ms = 1, .warmup_ms = 20, .calibrate_ms = 50, .tsc_hz = 0,
		.file = NULL, .speculation = SPEC_NONE,
		.seccomp = NULL, .seccomp_times = 1, .seccomp_flags = 0,
		.expect_errno = 0, .nr = -1,
	};
	struct run r;
	int probe_only = 0;
	char what[64];

	parse_args(argc, argv, &o, &probe_only);
	/* Before anything is timed or written: does the mechanism work here? */
	tw_require_mechanism();
	if (probe_only)
		return 0;
	memset(&r, 0, sizeof(r));
	prepare(&o, &r, what, sizeof(what));
	measure(&o, &r, what);
	if (o.table)
		print_table(&o, &r);
	else
		print_json(&o, &r);
	return 0;
}
