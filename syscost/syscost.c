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
 *                  bytes long; no timed call allocates blocks.
 *   write-sync     the same with O_SYNC: every call waits for the device
 *   gettimeofday   gettimeofday(tv, NULL): 0
 *   clock_gettime  clock_gettime(CLOCK_MONOTONIC, &ts): 0
 *   time           time(NULL): the time, within an hour of the start
 * The last three are what the vsyscall page and the 64-bit vDSO can do;
 * those mechanisms refuse the others (tw_nrs), and every other mechanism
 * enters the kernel for them.
 *
 * Output: one JSON object (docs/syscost.md has the schema) or one line.
 * Exit 0 measured; 1 run-time error or a wrong syscall result; 2 bad usage;
 * 77 the mechanism, or the asked speculation setting, is not available here
 * (the reason is on stderr).
 */
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <cpuid.h>
#include <ctype.h>
#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json_out.h"
#include "tw_cli.h"
#include "tw_syscall.h"
#include "tw_sysnr.h"

#define MAX_BATCHES	10000
#define MAX_CALLS	100000000L
#define MAX_SIZE	(64L << 20)
#define EMPTY_MIN_CALLS	20000L	/* the empty loop runs at least this many */
#define TIME_WINDOW	3600	/* time: accepted up to this long after the start */

#ifdef TW_ABI32
#define ABI_NAME "i386"
#else
#define ABI_NAME "x86_64"
#endif

enum op {
	OP_NULL, OP_GETPPID, OP_WRITE_DEVNULL, OP_WRITE_FILE, OP_WRITE_SYNC,
	OP_GETTIMEOFDAY, OP_CLOCK_GETTIME, OP_TIME, OP_COUNT
};
static const char *const op_names[OP_COUNT] = {
	"null", "getppid", "write-devnull", "write-file", "write-sync",
	"gettimeofday", "clock_gettime", "time",
};
/* The system call each operation makes. */
static const long op_nrs[OP_COUNT] = {
	TW_NR_invalid, TW_NR_getppid, TW_NR_write, TW_NR_write, TW_NR_write,
	TW_NR_gettimeofday, TW_NR_clock_gettime, TW_NR_time,
};
#define OP_WRITES(op)	((op) == OP_WRITE_DEVNULL || (op) == OP_WRITE_FILE || \
			 (op) == OP_WRITE_SYNC)

enum shape { SHAPE_RET, SHAPE_JMP, SHAPE_INLINE, SHAPE_COUNT };
static const char *const shape_names[SHAPE_COUNT] = { "ret", "jmp", "inline" };

enum clk { CLK_TSC, CLK_MONO };

/* PR_SET_SPECULATION_CTRL's controls that --speculation can switch. */
enum spec { SPEC_NONE, SPEC_SSBD, SPEC_IB, SPEC_ALL };

/* Long options' vals, clear of the short letters (see tw_usage_getopt). */
enum {
	OPT_OP = TW_LONGOPT, OPT_SIZE, OPT_FILE, OPT_CALLS, OPT_BATCHES,
	OPT_BATCH_MS, OPT_WARMUP_MS, OPT_CPU, OPT_CLOCK, OPT_CALIBRATE_MS,
	OPT_TSC_HZ, OPT_FORMAT, OPT_PROBE, OPT_REALTIME, OPT_SHAPE,
	OPT_MAX_REDO, OPT_SPECULATION, OPT_HELP
};

typedef long (*call3_fn)(long, long, long, long);
typedef long (*loop_fn)(struct tw_loop *, long);

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

static enum clk clk;
static int have_rdtscp;
static double tsc_hz;		/* ticks per second; 1e9 for CLK_MONO */

/* ---- clocks ------------------------------------------------------------ */

static uint64_t
mono_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC_RAW, &ts) == -1)
		err(1, "clock_gettime(CLOCK_MONOTONIC_RAW)");
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* This thread's exact on-CPU time (user + system), from the scheduler. */
static uint64_t
thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == -1)
		err(1, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

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

static double
ticks_to_ns(uint64_t t)
{
	return (double)t * 1e9 / tsc_hz;
}

/* CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every state. */
static int
invariant_tsc(void)
{
	unsigned a, b, c, d;

	if (__get_cpuid_max(0x80000000, NULL) < 0x80000007)
		return 0;
	__cpuid(0x80000007, a, b, c, d);
	return (d >> 8) & 1;
}

static int
cpu_has_rdtscp(void)
{
	unsigned a, b, c, d;

	if (__get_cpuid_max(0x80000000, NULL) < 0x80000001)
		return 0;
	__cpuid(0x80000001, a, b, c, d);
	return (d >> 27) & 1;
}

/* A (monotonic ns, TSC) pair read as close together as this CPU allows. */
static void
clock_pair(uint64_t *ns, uint64_t *tsc)
{
	uint64_t best = UINT64_MAX;
	int i;

	for (i = 0; i < 9; i++) {
		uint64_t n0 = mono_ns(), t = tsc_begin(), n1 = mono_ns();

		if (n1 - n0 < best) {
			best = n1 - n0;
			*ns = n0 + (n1 - n0) / 2;
			*tsc = t;
		}
	}
}

/* TSC ticks per second, measured against CLOCK_MONOTONIC_RAW. */
static double
calibrate_tsc(double ms)
{
	uint64_t ns0, t0, ns1, t1, until;

	clock_pair(&ns0, &t0);
	until = ns0 + (uint64_t)(ms * 1e6);
	while (mono_ns() < until)
		;	/* busy: the CPU stays awake and at speed */
	clock_pair(&ns1, &t1);
	if (ns1 <= ns0 || t1 <= t0)
		errx(1, "the TSC or CLOCK_MONOTONIC_RAW did not advance; use --clock monotonic");
	return (double)(t1 - t0) * 1e9 / (double)(ns1 - ns0);
}

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
__attribute__((noinline, noclone)) static long
empty_syscall3(long nr, long a1, long a2, long a3)
{
	long r = call.lo;

	__asm__ __volatile__("" : "+r"(r) : "r"(nr), "r"(a1), "r"(a2), "r"(a3) : "memory");
	return r;
}

/*
 * The ret and jmp shapes: n calls of fn, each result checked; returns clock
 * ticks.  The first wrong result and the number of wrong results come back
 * through bad/first.
 */
__attribute__((noinline)) static uint64_t
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
__attribute__((noinline)) static uint64_t
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

const char tw_usage[] =
"usage: syscost [-h] [--batch-ms ms] [--batches k] [--calibrate-ms ms]\n"
"               [--calls n] [--clock auto|tsc|monotonic] [--cpu n]\n"
"               [--file path] [--format json|table] [--max-redo n] [--op op]\n"
"               [--realtime] [--shape ret|jmp|inline] [--size n]\n"
"               [--speculation ssbd|indirect-branch|all] [--tsc-hz hz]\n"
"               [--warmup-ms ms]\n"
"       syscost --probe";

static void __attribute__((noreturn))
help(void)
{
	printf("%s\n\n", tw_usage);
	printf(
"Measure ns per system call through the '%s' mechanism (%d-bit).\n"
"\n"
"  --op OP            null | getppid | write-devnull | write-file | write-sync |\n"
"                     gettimeofday | clock_gettime | time (default getppid, or\n"
"                     time for a mechanism that cannot make getppid)\n"
"  --shape S          ret: the stub called and returning by ret (default);\n"
"                     jmp: the stub leaving by an indirect jump; inline: the\n"
"                     entry inline in the timed loop\n"
"  --size N           bytes per write (write-devnull 1, write-file/-sync 256)\n"
"  --file PATH        file for write-file/write-sync, kept afterwards (default:\n"
"                     a temporary file in the current directory, unlinked at once);\n"
"                     a regular file only: a symbolic link, FIFO or device is\n"
"                     refused (exit 1) before anything is written\n"
"  --calls N          calls per batch (default: enough for --batch-ms)\n"
"  --batches K        batches, one sample each (default 10)\n"
"  --max-redo N       extra batches, one per disturbed batch, at most N\n"
"                     (default: as many as --batches)\n"
"  --batch-ms MS      target batch length when --calls is not given (default 1)\n"
"  --warmup-ms MS     untimed calls before the first batch (default 20)\n"
"  --cpu N            pin to CPU N; -1: do not pin (default: last allowed CPU)\n"
"  --clock C          auto | tsc | monotonic (default auto: tsc if invariant)\n"
"  --calibrate-ms MS  how long to measure the TSC rate (default 50)\n"
"  --tsc-hz HZ        use this TSC rate instead of measuring it\n"
"  --realtime         run under SCHED_FIFO when allowed (root/CAP_SYS_NICE)\n"
"  --speculation S    disable this speculation for the process first (prctl):\n"
"                     ssbd | indirect-branch | all\n"
"  --format F         json (default) | table\n"
"  --probe            exit 0 if the mechanism works here, else 77 with the reason\n"
"  -h, --help         this text\n"
"\n"
"Numbers are decimal and nothing else: no blanks, no '+', no hex.\n"
"Exit: 0 measured, 1 run-time error or wrong syscall result, 2 bad usage,\n"
"77 mechanism (or speculation control) unavailable.  Method and JSON schema:\n"
"docs/syscost.md.\n",
	    tw_mechanism, (int)(sizeof(void *) * 8));
	if (fflush(stdout) == EOF || ferror(stdout))
		err(1, "stdout");
	exit(0);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double
median(const double *v, long n)
{
	double *s = malloc((size_t)n * sizeof(*s));
	double m;

	if (s == NULL)
		err(1, "malloc");
	memcpy(s, v, (size_t)n * sizeof(*s));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}

static const char *
result_text(long r, char *buf, size_t len)
{
	if (r < 0 && r > -4096)
		snprintf(buf, len, "%ld (%s)", r, strerror((int)-r));
	else
		snprintf(buf, len, "%ld", r);
	return buf;
}

/* The last CPU this process may run on. */
static long
default_cpu(void)
{
	cpu_set_t set;
	long i;

	if (sched_getaffinity(0, sizeof(set), &set) == -1)
		err(1, "sched_getaffinity");
	for (i = CPU_SETSIZE - 1; i >= 0; i--)
		if (CPU_ISSET(i, &set))
			return i;
	errx(1, "sched_getaffinity: no CPU allowed");
}

static void
pin(long cpu)
{
	cpu_set_t set;

	if (cpu >= CPU_SETSIZE)
		errx(1, "CPU %ld is beyond CPU_SETSIZE", cpu);
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) == -1)
		err(1, "sched_setaffinity(CPU %ld)", cpu);
}

/* Whether the mechanism can make system call nr at all (tw_nrs). */
static int
mechanism_makes(long nr)
{
	const long *p;

	if (tw_nrs == NULL)
		return 1;	/* an entry instruction: any number */
	for (p = tw_nrs; *p != -1; p++)
		if (*p == nr)
			return 1;
	return 0;
}

static int
shape_available(enum shape s)
{
	switch (s) {
	case SHAPE_RET:
		return 1;
	case SHAPE_JMP:
		return tw_syscall3_jmp != NULL;
	case SHAPE_INLINE:
		return tw_loop3 != NULL && tw_loop3_empty != NULL;
	default:
		return 0;
	}
}

/* "a, b and c": the names of the operations or shapes this build has. */
static const char *
available_list(int shapes)
{
	static char buf[256];
	int i, n = shapes ? SHAPE_COUNT : OP_COUNT;

	buf[0] = '\0';
	for (i = 0; i < n; i++) {
		int ok = shapes ? shape_available((enum shape)i) :
		    mechanism_makes(op_nrs[i]);

		if (!ok)
			continue;
		if (buf[0] != '\0')
			strncat(buf, ", ", sizeof(buf) - strlen(buf) - 1);
		strncat(buf, shapes ? shape_names[i] : op_names[i],
		    sizeof(buf) - strlen(buf) - 1);
	}
	return buf;
}

/* ---- disturbance counters --------------------------------------------------- */

/*
 * A /proc file read whole, from the start, into a buffer that grows: the
 * counters are read around every batch, so the file stays open.
 */
struct procfile {
	const char *path;
	int fd;			/* -1: unreadable */
	char *buf;
	size_t cap;
};

static struct procfile proc_stat = { "/proc/stat", -1, NULL, 0 };
static struct procfile proc_irq = { "/proc/interrupts", -1, NULL, 0 };

static void
proc_open(struct procfile *f)
{
	f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
	f->cap = 1 << 16;
	if (f->fd != -1 && (f->buf = malloc(f->cap)) == NULL)
		err(1, "malloc");
}

/* The file's text, NUL-terminated, or NULL when it cannot be read. */
static const char *
proc_read(struct procfile *f)
{
	size_t len;
	ssize_t r;

	if (f->fd == -1)
		return NULL;
	for (;;) {
		if (lseek(f->fd, 0, SEEK_SET) == -1)
			return NULL;
		len = 0;
		while ((r = read(f->fd, f->buf + len, f->cap - 1 - len)) > 0)
			if ((len += (size_t)r) == f->cap - 1)
				break;
		if (r == -1)
			return NULL;
		if (len < f->cap - 1)
			break;
		f->cap *= 2;	/* it filled the buffer: read it again, whole */
		if ((f->buf = realloc(f->buf, f->cap)) == NULL)
			err(1, "realloc");
	}
	f->buf[len] = '\0';
	return f->buf;
}

/* The steal column (USER_HZ ticks) of CPU cpu in /proc/stat, or -1. */
static long long
read_steal(long cpu)
{
	const char *s = proc_read(&proc_stat), *p;
	char key[32];
	unsigned long long v[8];

	if (s == NULL || cpu < 0)
		return -1;
	snprintf(key, sizeof(key), "\ncpu%ld ", cpu);
	if ((p = strstr(s, key)) == NULL)
		return -1;
	/* user nice system idle iowait irq softirq steal */
	if (sscanf(p + strlen(key), "%llu %llu %llu %llu %llu %llu %llu %llu",
	    &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8)
		return -1;
	return (long long)v[7];
}

/*
 * The interrupts CPU cpu has taken, summed over every line of
 * /proc/interrupts that has a count for each CPU of its header, or -1.
 */
static long long
read_irqs(long cpu)
{
	const char *s = proc_read(&proc_irq), *p, *eol;
	char name[32];
	long ncols = 0, col = -1;
	long long sum = 0;

	if (s == NULL || cpu < 0)
		return -1;
	snprintf(name, sizeof(name), "CPU%ld", cpu);
	/* The header: "CPU0 CPU1 ..." for the online CPUs. */
	eol = strchr(s, '\n');
	for (p = s; eol != NULL && p < eol;) {
		size_t n;

		while (p < eol && isspace((unsigned char)*p))
			p++;
		n = strcspn(p, " \t\n");
		if (n == 0)
			break;
		if (n == strlen(name) && strncmp(p, name, n) == 0)
			col = ncols;
		ncols++;
		p += n;
	}
	if (eol == NULL || col < 0)
		return -1;
	for (p = eol + 1; *p != '\0'; p = eol + 1) {
		const char *q = strchr(p, ':');
		unsigned long long v = 0, mine = 0;
		long k;

		eol = strchr(p, '\n');
		if (eol == NULL)
			eol = p + strlen(p);
		if (q != NULL && q < eol) {
			for (q++, k = 0; k < ncols; k++) {
				char *end;

				while (*q == ' ')
					q++;
				if (!isdigit((unsigned char)*q))
					break;
				v = strtoull(q, &end, 10);
				if (k == col)
					mine = v;
				q = end;
			}
			/* A line with fewer counts than CPUs (ERR, MIS) holds no column. */
			if (k == ncols)
				sum += (long long)mine;
		}
		if (*eol == '\0')
			break;
	}
	return sum;
}

struct counters {
	long nivcsw;
	long long steal, irqs;	/* -1: unreadable */
};

static void
counters_read(struct counters *c, long cpu, int after)
{
	struct rusage ru;

	/* Read nearest the window last before it and first after it. */
	if (after) {
		if (getrusage(RUSAGE_THREAD, &ru) == -1)
			err(1, "getrusage(RUSAGE_THREAD)");
		c->irqs = read_irqs(cpu);
		c->steal = read_steal(cpu);
	} else {
		c->steal = read_steal(cpu);
		c->irqs = read_irqs(cpu);
		if (getrusage(RUSAGE_THREAD, &ru) == -1)
			err(1, "getrusage(RUSAGE_THREAD)");
	}
	c->nivcsw = ru.ru_nivcsw;
}

/* ---- speculation ------------------------------------------------------------ */

/* "ssbd" and "indirect-branch" as prctl names them, and disable each asked. */
static void
speculation_apply(enum spec s)
{
	static const struct {
		enum spec which;
		const char *name;
		unsigned long ctrl;
	} ctl[] = {
		{ SPEC_SSBD, "ssbd", PR_SPEC_STORE_BYPASS },
		{ SPEC_IB, "indirect-branch", PR_SPEC_INDIRECT_BRANCH },
	};
	size_t i;

	for (i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++) {
		int st;

		if (s != SPEC_ALL && s != ctl[i].which)
			continue;
		st = prctl(PR_GET_SPECULATION_CTRL, ctl[i].ctrl, 0, 0, 0);
		if (st == -1) {
			if (errno == EINVAL || errno == ENODEV)
				errx(TW_EXIT_UNSUPPORTED, "%s: this kernel has no such "
				    "speculation control (PR_GET_SPECULATION_CTRL: %s)",
				    ctl[i].name, strerror(errno));
			err(1, "prctl(PR_GET_SPECULATION_CTRL, %s)", ctl[i].name);
		}
		if (!(st & PR_SPEC_PRCTL))
			errx(TW_EXIT_UNSUPPORTED, "%s: the kernel does not leave it "
			    "to prctl (%s)", ctl[i].name,
			    st == PR_SPEC_NOT_AFFECTED ? "this CPU is not affected" :
			    st & PR_SPEC_FORCE_DISABLE ? "force-disabled" :
			    st & PR_SPEC_DISABLE ? "always disabled" :
			    st & PR_SPEC_ENABLE ? "always enabled" : "no per-task control");
		if (prctl(PR_SET_SPECULATION_CTRL, ctl[i].ctrl, PR_SPEC_DISABLE, 0, 0) == -1) {
			if (errno == ENXIO || errno == EPERM)
				errx(TW_EXIT_UNSUPPORTED, "%s: the kernel refused to "
				    "disable it for this process (%s)", ctl[i].name,
				    strerror(errno));
			err(1, "prctl(PR_SET_SPECULATION_CTRL, %s, PR_SPEC_DISABLE)",
			    ctl[i].name);
		}
	}
}

/* {"Speculation_Store_Bypass":"...",...}: the Speculation lines of /proc/self/status. */
static void
speculation_status_json(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int n = 0;

	putchar('{');
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		char *colon = strchr(line, ':'), *v;

		if (strncmp(line, "Speculation", 11) != 0 || colon == NULL)
			continue;
		*colon = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		v[strcspn(v, "\n")] = '\0';
		if (n++)
			putchar(',');
		json_string(line);
		putchar(':');
		json_string(v);
	}
	if (f != NULL)
		fclose(f);
	putchar('}');
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
	return median(v, BRACKET_TRIALS);
}

/* Calls per batch so that one batch lasts at least target_ns. */
static long
autosize(double target_ns, const char *what)
{
	long n = 1;

	for (;;) {
		double ns = ticks_to_ns(timed(0, n, what));
		double want;

		if (ns >= target_ns || n >= MAX_CALLS)
			return n;
		/* Grow 2..10x per step: a lucky first call must not overshoot. */
		want = ns > 0 ? target_ns / (ns / (double)n) * 1.1 + 1 : (double)n * 10;
		if (want > (double)n * 10)
			want = (double)n * 10;
		if (want < (double)n * 2)
			want = (double)n * 2;
		n = want > (double)MAX_CALLS ? MAX_CALLS : (long)want;
	}
}

static void
parse_args(int argc, char **argv, struct opts *o, int *probe_only)
{
	static const struct option longopts[] = {
		{ "op", required_argument, NULL, OPT_OP },
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "file", required_argument, NULL, OPT_FILE },
		{ "calls", required_argument, NULL, OPT_CALLS },
		{ "batches", required_argument, NULL, OPT_BATCHES },
		{ "batch-ms", required_argument, NULL, OPT_BATCH_MS },
		{ "warmup-ms", required_argument, NULL, OPT_WARMUP_MS },
		{ "cpu", required_argument, NULL, OPT_CPU },
		{ "clock", required_argument, NULL, OPT_CLOCK },
		{ "calibrate-ms", required_argument, NULL, OPT_CALIBRATE_MS },
		{ "tsc-hz", required_argument, NULL, OPT_TSC_HZ },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "probe", no_argument, NULL, OPT_PROBE },
		{ "realtime", no_argument, NULL, OPT_REALTIME },
		{ "shape", required_argument, NULL, OPT_SHAPE },
		{ "max-redo", required_argument, NULL, OPT_MAX_REDO },
		{ "speculation", required_argument, NULL, OPT_SPECULATION },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int ch, i;

	/* getopt's own messages name argv[0]; ours name __progname, as err does. */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (ch) {
		case OPT_OP:
			for (i = 0; i < OP_COUNT; i++)
				if (strcmp(optarg, op_names[i]) == 0)
					break;
			if (i == OP_COUNT)
				tw_usage_err("--op: unknown operation %s (null, "
				    "getppid, write-devnull, write-file, write-sync, "
				    "gettimeofday, clock_gettime, time)",
				    tw_quote(optarg));
			o->op = i;
			break;
		case OPT_SHAPE:
			for (i = 0; i < SHAPE_COUNT; i++)
				if (strcmp(optarg, shape_names[i]) == 0)
					break;
			if (i == SHAPE_COUNT)
				tw_usage_err("--shape: %s is not ret, jmp or inline",
				    tw_quote(optarg));
			o->shape = (enum shape)i;
			break;
		case OPT_SIZE:
			o->size = tw_int_arg("--size", optarg, 1, MAX_SIZE);
			break;
		case OPT_FILE:
			if (*optarg == '\0')
				tw_usage_err("--file: empty path");
			o->file = optarg;
			break;
		case OPT_CALLS:
			o->calls = tw_int_arg("--calls", optarg, 1, MAX_CALLS);
			break;
		case OPT_BATCHES:
			o->batches = tw_int_arg("--batches", optarg, 1, MAX_BATCHES);
			break;
		case OPT_MAX_REDO:
			o->max_redo = tw_int_arg("--max-redo", optarg, 0, MAX_BATCHES);
			break;
		case OPT_BATCH_MS:
			o->batch_ms = tw_real_arg("--batch-ms", optarg, 0.001, 10000);
			break;
		case OPT_WARMUP_MS:
			o->warmup_ms = tw_real_arg("--warmup-ms", optarg, 0, 60000);
			break;
		case OPT_CPU:
			o->cpu = tw_int_arg("--cpu", optarg, -1, CPU_SETSIZE - 1);
			break;
		case OPT_CLOCK:
			if (strcmp(optarg, "auto") == 0)
				o->clock = -1;
			else if (strcmp(optarg, "tsc") == 0)
				o->clock = CLK_TSC;
			else if (strcmp(optarg, "monotonic") == 0)
				o->clock = CLK_MONO;
			else
				tw_usage_err("--clock: %s is not auto, tsc or "
				    "monotonic", tw_quote(optarg));
			break;
		case OPT_CALIBRATE_MS:
			o->calibrate_ms = tw_real_arg("--calibrate-ms", optarg, 1,
			    10000);
			break;
		case OPT_TSC_HZ:
			o->tsc_hz = tw_real_arg("--tsc-hz", optarg, 1e6, 1e11);
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "json") == 0)
				o->table = 0;
			else if (strcmp(optarg, "table") == 0)
				o->table = 1;
			else
				tw_usage_err("--format: %s is not json or table",
				    tw_quote(optarg));
			break;
		case OPT_SPECULATION:
			if (strcmp(optarg, "ssbd") == 0)
				o->speculation = SPEC_SSBD;
			else if (strcmp(optarg, "indirect-branch") == 0)
				o->speculation = SPEC_IB;
			else if (strcmp(optarg, "all") == 0)
				o->speculation = SPEC_ALL;
			else
				tw_usage_err("--speculation: %s is not ssbd, "
				    "indirect-branch or all", tw_quote(optarg));
			break;
		case OPT_PROBE:
			*probe_only = 1;
			break;
		case OPT_REALTIME:
			o->realtime = 1;
			break;
		case 'h':
		case OPT_HELP:
			help();
		default:
			tw_usage_getopt(ch, argv);
		}
	}
	if (optind < argc)
		tw_usage_err("unexpected argument %s", tw_quote(argv[optind]));
	/*
	 * The default operation is getppid, or for a mechanism that cannot make
	 * it the call its probe makes (time, for the vsyscall page and the vDSO).
	 */
	if (o->op == -1) {
		long nr = mechanism_makes(TW_NR_getppid) ? TW_NR_getppid :
		    *(const volatile long *)&tw_probe_nr;

		for (i = 0; i < OP_COUNT && op_nrs[i] != nr; i++)
			;
		o->op = i < OP_COUNT ? i : OP_GETPPID;
	}
	if (o->size != -1 && !OP_WRITES(o->op))
		tw_usage_err("--size applies to the write operations only");
	if (o->file != NULL && o->op != OP_WRITE_FILE && o->op != OP_WRITE_SYNC)
		tw_usage_err("--file applies to write-file and write-sync only");
	if (o->size == -1)
		o->size = o->op == OP_WRITE_DEVNULL ? 1 : 256;
	if (o->max_redo == -1)
		o->max_redo = o->batches;
	/*
	 * What this build's mechanism cannot do is a usage error, not a failed
	 * call.  --probe asks only whether the mechanism works at all.
	 */
	if (*probe_only)
		return;
	if (!mechanism_makes(op_nrs[o->op]))
		tw_usage_err("--op %s: the %s mechanism cannot make that call "
		    "(its operations: %s)", op_names[o->op], tw_mechanism,
		    available_list(0));
	if (!shape_available(o->shape))
		tw_usage_err("--shape %s: the %s mechanism has no such shape "
		    "(it has: %s)", shape_names[o->shape], tw_mechanism,
		    available_list(1));
}

int
main(int argc, char **argv)
{
	struct opts o = {
		.op = -1, .shape = SHAPE_RET, .size = -1, .calls = 0,
		.batches = 10, .max_redo = -1, .cpu = -2, .clock = -1, .table = 0,
		.batch_ms = 1, .warmup_ms = 20, .calibrate_ms = 50, .tsc_hz = 0,
		.file = NULL, .speculation = SPEC_NONE,
	};
	static const char *const spec_names[] = { NULL, "ssbd", "indirect-branch", "all" };
	int probe_only = 0, have_steal, have_irqs;
	const char *clock_why, *sched = "other";
	char sched_why[160] = "not asked for (--realtime)";
	char *buf = NULL;
	double *loop_ns, *raw_ns, *samples_ns, *offcpu_ns, t_ns, loop_med;
	long long *nivcsw, *steal, *irqs;
	unsigned char *disturbed;
	double bracket_ns;
	long k, n, n_empty, cpu, nmax, measured, redone = 0, ndisturbed = 0;
	uint64_t t0;
	struct stat st;
	char what[64];
	time_t now;

	parse_args(argc, argv, &o, &probe_only);
	shape = o.shape;
	shape_fn = shape == SHAPE_JMP ? tw_syscall3_jmp : tw_syscall3;

	/* Before anything is timed or written: does the mechanism work here? */
	tw_require_mechanism();
	if (probe_only)
		return 0;
	/* Before the clock is calibrated: the setting may slow this process. */
	if (o.speculation != SPEC_NONE)
		speculation_apply(o.speculation);

	/* Pin first: the TSC is then read and calibrated on one core. */
	cpu = o.cpu == -2 ? default_cpu() : o.cpu;
	if (cpu >= 0)
		pin(cpu);
	if (o.realtime) {
		struct sched_param sp = { .sched_priority = 50 };

		if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) {
			sched = "fifo";
			snprintf(sched_why, sizeof(sched_why), "SCHED_FIFO priority 50");
		} else
			snprintf(sched_why, sizeof(sched_why),
			    "SCHED_FIFO refused (%s): ordinary processes may preempt batches",
			    strerror(errno));
	}

	have_rdtscp = cpu_has_rdtscp();
	if (o.clock == CLK_MONO) {
		clk = CLK_MONO;
		clock_why = "asked for (--clock monotonic)";
	} else if (invariant_tsc()) {
		clk = CLK_TSC;
		clock_why = "invariant TSC (CPUID 0x80000007 EDX bit 8)";
	} else if (o.clock == CLK_TSC) {
		clk = CLK_TSC;
		clock_why = "asked for (--clock tsc) although the TSC is not invariant";
	} else {
		clk = CLK_MONO;
		clock_why = "the TSC is not invariant (CPUID 0x80000007 EDX bit 8 clear)";
	}
	if (clk == CLK_MONO)
		tsc_hz = 1e9;
	else if (o.tsc_hz > 0)
		tsc_hz = o.tsc_hz;
	else
		tsc_hz = calibrate_tsc(o.calibrate_ms);

	/* The call and the results that prove it did its work. */
	memset(&call, 0, sizeof(call));
	call.nr = op_nrs[o.op];
	switch (o.op) {
	case OP_NULL:
		call.lo = call.hi = -ENOSYS;
		break;
	case OP_GETPPID:
		call.lo = call.hi = (long)getppid();
		break;
	case OP_WRITE_DEVNULL:
	case OP_WRITE_FILE:
	case OP_WRITE_SYNC:
		if ((buf = tw_alloc((size_t)o.size)) == NULL)
			err(1, "tw_alloc(%ld) for the %s mechanism", o.size, tw_mechanism);
		memset(buf, 'x', (size_t)o.size);
		open_target(&o);
		call.a1 = tgt.fd;
		call.a2 = (long)buf;
		call.a3 = o.size;
		call.lo = call.hi = o.size;
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
	case OP_TIME:
		if ((now = time(NULL)) == (time_t)-1)
			err(1, "time");
		call.lo = (long)now;
		call.hi = (long)now + TIME_WINDOW;
		break;
	default:
		abort();
	}
	snprintf(what, sizeof(what), "%s", o.op == OP_NULL ? "syscall(TW_NR_invalid)" :
	    OP_WRITES(o.op) ? "write()" : o.op == OP_GETPPID ? "getppid()" :
	    o.op == OP_GETTIMEOFDAY ? "gettimeofday()" :
	    o.op == OP_CLOCK_GETTIME ? "clock_gettime()" : "time()");

	n = o.calls ? o.calls : autosize(o.batch_ms * 1e6, what);

	/*
	 * Warm-up passes of exactly n calls, so that the file (write-file/-sync)
	 * is n * size bytes when the first batch overwrites it.
	 */
	if (tgt.rewind && ftruncate(tgt.fd, 0) == -1)
		err(1, "ftruncate %s", tgt.path);
	t0 = mono_ns();
	do
		(void)timed(0, n, what);
	while ((double)(mono_ns() - t0) < o.warmup_ms * 1e6);

	nmax = o.batches + o.max_redo;
	loop_ns = calloc((size_t)nmax, sizeof(double));
	raw_ns = calloc((size_t)nmax, sizeof(double));
	samples_ns = calloc((size_t)nmax, sizeof(double));
	offcpu_ns = calloc((size_t)nmax, sizeof(double));
	nivcsw = calloc((size_t)nmax, sizeof(long long));
	steal = calloc((size_t)nmax, sizeof(long long));
	irqs = calloc((size_t)nmax, sizeof(long long));
	disturbed = calloc((size_t)nmax, 1);
	if (loop_ns == NULL || raw_ns == NULL || samples_ns == NULL ||
	    offcpu_ns == NULL || nivcsw == NULL || steal == NULL || irqs == NULL ||
	    disturbed == NULL)
		err(1, "calloc");
	proc_open(&proc_stat);
	proc_open(&proc_irq);
	have_steal = read_steal(cpu) >= 0;
	have_irqs = read_irqs(cpu) >= 0;
	n_empty = n > EMPTY_MIN_CALLS ? n : EMPTY_MIN_CALLS;
	bracket_ns = cpu_bracket_ns();
	/* One more batch for each disturbed one, while --max-redo allows. */
	for (k = 0, measured = o.batches; k < measured; k++) {
		uint64_t cpu0, cpu1;
		struct counters c0, c1;

		loop_ns[k] = ticks_to_ns(timed(1, n_empty, NULL)) / (double)n_empty;
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
		counters_read(&c0, cpu, 0);
		cpu0 = thread_cpu_ns();
		t_ns = ticks_to_ns(timed(0, n, what));
		cpu1 = thread_cpu_ns();
		counters_read(&c1, cpu, 1);
		raw_ns[k] = t_ns / (double)n;
		offcpu_ns[k] = (t_ns - ((double)(cpu1 - cpu0) - bracket_ns)) /
		    (double)n;
		nivcsw[k] = c1.nivcsw - c0.nivcsw;
		steal[k] = have_steal && c0.steal >= 0 && c1.steal >= 0 ?
		    c1.steal - c0.steal : 0;
		irqs[k] = have_irqs && c0.irqs >= 0 && c1.irqs >= 0 ?
		    c1.irqs - c0.irqs : 0;
		disturbed[k] = nivcsw[k] > 0 || steal[k] > 0;
		if (disturbed[k]) {
			ndisturbed++;
			if (redone < o.max_redo) {
				redone++;
				measured++;
			}
		}
	}
	/*
	 * Subtract the median empty-loop cost, not each batch's own: an
	 * interrupt landing in one short empty batch must not bend the sample
	 * beside it.
	 */
	loop_med = median(loop_ns, measured);
	for (k = 0; k < measured; k++)
		samples_ns[k] = raw_ns[k] - loop_med;
	st.st_size = -1;
	if (tgt.rewind && fstat(tgt.fd, &st) == -1)
		err(1, "fstat %s", tgt.path);
	if (tgt.fd != -1 && close(tgt.fd) == -1)
		err(1, "close %s", tgt.path);	/* the data may only fail here */

	if (o.table) {
		double lo = samples_ns[0], hi = samples_ns[0];

		for (k = 1; k < measured; k++) {
			lo = samples_ns[k] < lo ? samples_ns[k] : lo;
			hi = samples_ns[k] > hi ? samples_ns[k] : hi;
		}
		printf("%d-%s %s", (int)sizeof(long) * 8, tw_mechanism, op_names[o.op]);
		if (OP_WRITES(o.op))
			printf(" size %ld", o.size);
		if (shape != SHAPE_RET)
			printf(" shape %s", shape_names[shape]);
		printf(": %.1f ns/call median (min %.1f, max %.1f) over %ld batches of %ld calls"
		    " (%ld disturbed, %ld redone);"
		    " empty loop %.2f ns/call subtracted; clock %s",
		    median(samples_ns, measured), lo, hi, measured, n, ndisturbed,
		    redone, loop_med, clk == CLK_TSC ? "tsc" : "monotonic");
		if (clk == CLK_TSC)
			printf(" at %.4f GHz", tsc_hz / 1e9);
		printf(", cpu %ld, sched %s\n", cpu, sched);
		if (fflush(stdout) == EOF || ferror(stdout))
			err(1, "stdout");
		return 0;
	}

	printf("{\"variant\":\"%d-%s\",\"bits\":%d,\"abi\":\"%s\",\"mechanism\":",
	    (int)sizeof(long) * 8, tw_mechanism, (int)sizeof(long) * 8, ABI_NAME);
	json_string(tw_mechanism);
	printf(",\"op\":\"%s\",\"shape\":\"%s\",", op_names[o.op], shape_names[shape]);
	if (!OP_WRITES(o.op))
		printf("\"size\":null,\"file\":null,\"file_bytes\":null,");
	else {
		printf("\"size\":%ld,\"file\":", o.size);
		json_string(tgt.temp ? "(temporary, removed)" : tgt.path);
		if (tgt.rewind)
			printf(",\"file_bytes\":%lld,", (long long)st.st_size);
		else
			printf(",\"file_bytes\":null,");
	}
	if (call.lo == call.hi)
		printf("\"expect\":%ld,", call.lo);
	else
		printf("\"expect\":null,");
	printf("\"accept\":[%ld,%ld],\"clock\":\"%s\",\"clock_why\":", call.lo, call.hi,
	    clk == CLK_TSC ? "tsc" : "monotonic");
	json_string(clock_why);
	if (clk == CLK_TSC)
		printf(",\"tsc_hz\":%.0f,\"tsc_hz_source\":\"%s\"", tsc_hz,
		    o.tsc_hz > 0 ? "given" : "measured");
	else
		printf(",\"tsc_hz\":null,\"tsc_hz_source\":null");
	printf(",\"sched\":\"%s\",\"sched_why\":", sched);
	json_string(sched_why);
	printf(",\"speculation\":{\"asked\":");
	if (o.speculation == SPEC_NONE)
		printf("null");
	else
		json_string(spec_names[o.speculation]);
	printf(",\"status\":");
	speculation_status_json();
	printf("}");
	printf(",\"cpu\":%ld,\"calls_per_batch\":%ld,\"empty_calls_per_batch\":%ld,"
	    "\"batches\":%ld,\"max_redo\":%ld,\"redone\":%ld,\"warmup_ms\":%g,",
	    cpu, n, n_empty, o.batches, o.max_redo, redone, o.warmup_ms);
	json_array("loop_ns_per_call", loop_ns, measured, 4);
	putchar(',');
	json_array("samples_ns", samples_ns, measured, 4);
	putchar(',');
	json_array("raw_ns", raw_ns, measured, 4);
	putchar(',');
	json_array("offcpu_ns_per_call", offcpu_ns, measured, 4);
	printf(",\"offcpu_bracket_ns\":%.1f,", bracket_ns);
	json_int_array("nivcsw", nivcsw, measured);
	putchar(',');
	if (have_steal)
		json_int_array("steal_ticks", steal, measured);
	else
		printf("\"steal_ticks\":null");
	putchar(',');
	if (have_irqs)
		json_int_array("irqs", irqs, measured);
	else
		printf("\"irqs\":null");
	putchar(',');
	json_bool_array("disturbed", disturbed, measured);
	printf(",\"errors\":0}\n");
	if (fflush(stdout) == EOF || ferror(stdout))
		err(1, "stdout");
	return 0;
}
