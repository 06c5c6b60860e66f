/*
 * options.c: syscost's command line: the usage and help texts, what this
 * build's mechanism can do (its operations and loop shapes), and parse_args,
 * which turns argv into a struct opts or stops with a usage error (exit 2).
 * What the mechanism cannot do is a usage error, not a failed call.
 */
#include <err.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "options.h"
#include "tw_cli.h"
#include "tw_syscall.h"
#include "tw_sysnr.h"

#define MAX_BATCHES	10000
#define MAX_SIZE	(64L << 20)

const char tw_usage[] =
"usage: syscost [-h] [--batch-ms ms] [--batches k] [--calibrate-ms ms]\n"
"               [--calls n] [--clock auto|tsc|monotonic] [--cpu n]\n"
"               [--errno n] [--file path] [--format json|table] [--max-redo n]\n"
"               [--nr n] [--op op] [--realtime] [--seccomp file]\n"
"               [--seccomp-flags n] [--seccomp-times n]\n"
"               [--shape ret|jmp|inline] [--size n]\n"
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
"  --calls N          calls per batch (default: enough for --batch-ms;\n"
"                     write-file: at most 128 KiB of the file a batch)\n"
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
"  --seccomp FILE     put this seccomp filter (raw BPF instructions, as\n"
"                     seccomp_export_bpf writes them) between the process and\n"
"                     the kernel before measuring, with no_new_privs set\n"
"  --seccomp-times N  install it N times over, a stack of filters (default 1)\n"
"  --seccomp-flags N  seccomp()'s flags word for each install (default 0):\n"
"                     2 SECCOMP_FILTER_FLAG_LOG, 4 SPEC_ALLOW, as runtimes pass\n"
"  --nr N             --op null makes call number N instead of an invalid one,\n"
"                     one no table assigns (x86-64: 337-423; i386: 222, 223, 251,\n"
"                     285, 387-392, 415; either: 512 and above, below bit 30):\n"
"                     the kernel answers -ENOSYS, which is checked\n"
"  --errno N          the wall answers the measured call with -N instead of\n"
"                     the call's own result; the results are checked against it\n"
"  --format F         json (default) | table\n"
"  --probe            exit 0 if the mechanism works here, else 77 with the reason\n"
"  -h, --help         this text\n"
"\n"
"Numbers are decimal and nothing else: no blanks, no '+', no hex.\n"
"Exit: 0 measured, 1 run-time error or wrong syscall result, 2 bad usage,\n"
"77 mechanism (or speculation control) unavailable.  Method and JSON schema:\n"
"docs/syscost.md.\n",
	    tw_mechanism, (int)(sizeof(void *) * 8));
	tw_help_exit();
}

/*
 * Whether --nr's number is one no table of this build's ABI assigns, so that
 * the kernel can only answer -ENOSYS (and syscost checks it does): the gaps of
 * the tables (new calls common to every architecture are numbered from 424
 * since Linux 5.1; x86-64's own newest took 335, uretprobe, and 336, uprobe,
 * which kills a caller outside a probe's trampoline with SIGILL), and 512 and
 * above, past every x86 table, below x32's bit 30 (an x32 number would be a
 * real call on a kernel with x32).
 */
#ifdef TW_ABI32
#define UNASSIGNED_TEXT "i386: 222, 223, 251, 285, 387-392, 415, or 512 and above"
static int
unassigned(long nr)
{
	return nr == 222 || nr == 223 || nr == 251 || nr == 285 ||
	    (nr >= 387 && nr <= 392) || nr == 415 || nr >= 512;
}
#else
#define UNASSIGNED_TEXT "x86-64: 337-423, or 512 and above"
static int
unassigned(long nr)
{
	return (nr >= 337 && nr <= 423) || nr >= 512;
}
#endif

/* Whether the mechanism can make system call nr at all (tw_nrs). */
static int
mechanism_makes(long nr)
{
	const long *p;

	/*
	 * An entry instruction takes any number, and such a build can time
	 * cpuid in its place.  A mechanism that makes only some calls (the
	 * vsyscall page, the vDSO: tw_nrs) does only those, cpuid not among
	 * them, as variants/registry lists.
	 */
	if (tw_nrs == NULL)
		return 1;
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

/* The options whose argument is more than a number, a word or a flag. */
static void
take_op(const char *opt, const char *arg, void *to)
{
	int i;

	for (i = 0; i < OP_COUNT && strcmp(arg, op_names[i]) != 0; i++)
		;
	if (i == OP_COUNT)
		tw_usage_err("%s: unknown operation %s (null, getppid, write-devnull, "
		    "write-file, write-sync, gettimeofday, clock_gettime, time, cpuid, "
		    "verw, lfence)", opt, tw_quote(arg));
	*(int *)to = i;
}

static void
take_shape(const char *opt, const char *arg, void *to)
{
	*(enum shape *)to = (enum shape)tw_word_arg(opt, arg, shape_names, SHAPE_COUNT);
}

/* --file and --seccomp: a path, never an empty one. */
static void
take_path(const char *opt, const char *arg, void *to)
{
	if (*arg == '\0')
		tw_usage_err("%s: empty path", opt);
	*(const char **)to = arg;
}

static void
take_clock(const char *opt, const char *arg, void *to)
{
	static const char *const words[] = { "auto", "tsc", "monotonic" };
	static const int clocks[] = { -1, CLK_TSC, CLK_MONO };

	*(int *)to = clocks[tw_word_arg(opt, arg, words, 3)];
}

static void
take_speculation(const char *opt, const char *arg, void *to)
{
	static const char *const words[] = { "ssbd", "indirect-branch", "all" };
	static const enum spec specs[] = { SPEC_SSBD, SPEC_IB, SPEC_ALL };

	*(enum spec *)to = specs[tw_word_arg(opt, arg, words, 3)];
}

/* --nr: a number this build's table leaves unassigned, for the null op to make. */
static void
take_nr(const char *opt, const char *arg, void *to)
{
	long *nr = to;

	*nr = (long)tw_int_arg(opt, arg, 0, 0x3fffffffL);
	if (!unassigned(*nr))
		tw_usage_err("%s %ld: not a number this build's table leaves "
		    "unassigned (%s)", opt, *nr, UNASSIGNED_TEXT);
}

void
parse_args(int argc, char **argv, struct opts *o, int *probe_only)
{
	static const char *const format_words[] = { "json", "table" };
	const struct tw_opt opts[] = {
		TW_TAKE("op", take_op, &o->op),
		TW_LONG("size", &o->size, 1, MAX_SIZE),
		TW_TAKE("file", take_path, &o->file),
		TW_LONG("calls", &o->calls, 1, MAX_CALLS),
		TW_LONG("batches", &o->batches, 1, MAX_BATCHES),
		TW_REAL("batch-ms", &o->batch_ms, 0.001, 10000),
		TW_REAL("warmup-ms", &o->warmup_ms, 0, 60000),
		TW_LONG("cpu", &o->cpu, -1, CPU_SETSIZE - 1),
		TW_TAKE("clock", take_clock, &o->clock),
		TW_REAL("calibrate-ms", &o->calibrate_ms, 1, 10000),
		TW_REAL("tsc-hz", &o->tsc_hz, 1e6, 1e11),
		TW_WORD("format", &o->table, format_words, 2),
		TW_FLAG("probe", probe_only),
		TW_FLAG("realtime", &o->realtime),
		TW_TAKE("shape", take_shape, &o->shape),
		TW_LONG("max-redo", &o->max_redo, 0, MAX_BATCHES),
		TW_TAKE("speculation", take_speculation, &o->speculation),
		TW_TAKE("seccomp", take_path, &o->seccomp),
		TW_LONG("seccomp-times", &o->seccomp_times, 1, 64),
		/* MAX_ERRNO: the kernel caps SECCOMP_RET_ERRNO's data there. */
		TW_LONG("errno", &o->expect_errno, 1, 4095),
		/* TSYNC, LOG, SPEC_ALLOW: the flags a runtime installs with and a
		 * process alone may; no listener, no TSYNC_ESRCH. */
		TW_LONG("seccomp-flags", &o->seccomp_flags, 0, 7),
		TW_TAKE("nr", take_nr, &o->nr),
		TW_OPTS_END
	};
	int i;

	tw_options(argc, argv, opts, help);
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
	if (o->seccomp_times != 1 && o->seccomp == NULL)
		tw_usage_err("--seccomp-times applies with --seccomp only");
	if (o->seccomp_flags != 0 && o->seccomp == NULL)
		tw_usage_err("--seccomp-flags applies with --seccomp only");
	if (o->nr != -1 && o->op != OP_NULL)
		tw_usage_err("--nr applies to --op null only");
	if (o->expect_errno != 0 && o->seccomp == NULL)
		tw_usage_err("--errno applies with --seccomp only: only a wall "
		    "answers a call in its place");
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
	/* cpuid, verw and lfence run in the C loop, in place of the stub: there is no
	 * inline form. */
	if (OP_INSN(o->op) && o->shape == SHAPE_INLINE)
		tw_usage_err("--op %s runs as a called function: --shape ret or jmp",
		    op_names[o->op]);
	if (!shape_available(o->shape))
		tw_usage_err("--shape %s: the %s mechanism has no such shape "
		    "(it has: %s)", shape_names[o->shape], tw_mechanism,
		    available_list(1));
}
