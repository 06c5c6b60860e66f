/*
 * timewrite.c: time write() of stdin to a file at a range of buffer sizes.
 *
 *	timewrite [options] outfile [sync]
 *
 * This is the seed lab report's program (docs/seed-report.md, section
 * 1) with its usage unchanged: standard input is the data, `sync` opens
 * outfile with O_SYNC, and for BUFFSIZE = 256, 512, ..., 131072 the whole
 * input is written to outfile in BUFFSIZE chunks and one tab-separated row is
 * printed:
 *
 *	BUFFSIZE  user_s  sys_s  real_s  calls
 *
 * It is linked against one kernel-entry mechanism (tw_syscall.h) and every
 * timed write() goes through tw_syscall3(), so the same source measures
 * int 0x80, sysenter, syscall, the 32-bit vDSO and glibc.
 *
 * What it fixes in the seed:
 *  - Timing.  times() counts 10 ms ticks, so most rows read 0.0000.  Real
 *    time comes from clock_gettime(CLOCK_MONOTONIC) and user/system time
 *    from getrusage(RUSAGE_SELF), printed with nine decimals.
 *  - Input.  The seed found the input's length with lseek on fd 0, which
 *    fails on a pipe, and kept it in an int.  A regular file is read whole
 *    at its size; anything else is read until EOF into a growing buffer.
 *    Lengths and counts are 64-bit.  Input that does not fit in memory the
 *    mechanism can pass to the kernel is refused before outfile is created.
 *  - Writes.  A short write is continued rather than treated as an error,
 *    -EINTR is retried, and every write() issued is counted.  Any other
 *    error (ENOSPC, EFBIG, EIO), and a failing fsync() or close(), is fatal
 *    with the file's name: nothing is silently truncated.  SIGXFSZ is
 *    ignored so that `ulimit -f` yields EFBIG instead of killing us.
 *  - Repetition.  --reps N runs every size N times, interleaved (the
 *    repetition loop is outside the size loop, so slow drift affects every
 *    size alike), after one untimed warm-up pass, and reports the median.
 *
 * Choices this file makes, which the tests rely on:
 *  - Before every pass outfile is rewound with lseek(0) and, when it is a
 *    regular file, cut to zero length with ftruncate(0).  Every pass then
 *    does the same work, block allocation included, as the seed's first
 *    pass did; neither call is inside the timed region.  Outfiles that
 *    cannot seek (a pipe) or truncate (/dev/full) are written as they are.
 *  - The warm-up pass (at the first size) happens only when --reps is more
 *    than 1.  With the default single repetition the program issues exactly
 *    one pass per size, as the seed did, so tracers count what it reports.
 *  - `sync' and --dsync together open with both flags; the mode reported
 *    is then "sync", the stronger of the two.
 *  - With more than one repetition, tsv and csv gain two columns,
 *    real_s_min and real_s_max; json always carries min, max and every
 *    sample.  The median of an even number of samples is the mean of the
 *    middle two.
 *  - No chunk is longer than 0x7ffff000 bytes, the most Linux transfers in
 *    one write() (MAX_RW_COUNT on x86).  A longer request would be cut short
 *    by the kernel anyway, so the count of calls is the same, and the i386
 *    ABI (which reads a 32-bit count) never sees a truncated length.
 *  - user_s and sys_s are what getrusage() reports.  Unless the kernel does
 *    fine-grained CPU accounting, it splits a task's exact run time between
 *    user and system in proportion to timer-tick samples, so on a pass
 *    shorter than a few ticks the split can be wrong (all user, or all
 *    system) even though their sum is right.  real_s has no such problem.
 *  - outfile must not be the regular file standard input reads, by any
 *    name: that is refused (exit 1) before outfile is truncated, since an
 *    interrupted run would otherwise destroy the input.
 *  - Exit status: 0 on success, 1 on a run-time error, 2 on bad usage, 77
 *    when the linked mechanism does not work on this machine.
 */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json_out.h"
#include "tw_cli.h"
#include "tw_stats.h"
#include "tw_syscall.h"
#include "tw_sysnr.h"

/* The seed's sizes: 256, 512, ..., 131072. */
#define SEED_SIZES	"256-131072"

/*
 * Linux never moves more than this in one read() or write(): MAX_RW_COUNT,
 * INT_MAX rounded down to a 4 KiB page.
 */
#define MAX_CHUNK	0x7ffff000UL

/* A pipe read returns at most its capacity; start the buffer near it. */
#define STREAM_START	(64 * 1024)

enum format { FMT_TSV, FMT_CSV, FMT_JSON };

/* Long options' vals, clear of the short letters (see tw_usage_getopt). */
enum {
	OPT_DSYNC = TW_LONGOPT, OPT_FORMAT, OPT_FSYNC, OPT_HELP, OPT_PROBE,
	OPT_REPS, OPT_SIZES
};

/* One buffer size and everything measured at it. */
struct row {
	long long	 size;
	uint64_t	 calls;		/* write() calls issued in one pass */
	int		 calls_varied;	/* a later pass issued a different count */
	double		*user;		/* one sample per repetition */
	double		*sys;
	double		*real;
};

struct input {
	char		*buf;		/* from tw_alloc(): the kernel reads it */
	size_t		 len;
	size_t		 alloc;		/* what was asked of tw_alloc() */
};

const char tw_usage[] =
    "usage: timewrite [-h] [-b sizes] [--dsync] [--format tsv|csv|json] "
    "[--fsync] [--probe] [--reps n] outfile [sync]";

static void __attribute__((noreturn))
help(void)
{
	printf("%s\n\n", tw_usage);
	printf(
"Write standard input to outfile in chunks of each buffer size and print,\n"
"per size, one row: BUFFSIZE user_s sys_s real_s calls (tab-separated).\n"
"`sync' opens outfile with O_SYNC.  Before each pass outfile is rewound and\n"
"truncated; every write() goes through the %s mechanism (%d-bit).\n"
"\n"
"  -b, --sizes LIST   buffer sizes: a comma list of sizes and MIN-MAX ranges,\n"
"                     which double from MIN up to MAX (e.g. 256,1024 or\n"
"                     1-65536); default 256-131072\n"
"      --dsync        open outfile with O_DSYNC\n"
"      --format FMT   tsv (default, no header), csv (with a header) or json\n"
"      --fsync        fsync() outfile after each pass, inside the timed region\n"
"  -h, --help         print this help and exit\n"
"      --probe        only check that the mechanism works here: exit 0\n"
"                     silently, or print why not and exit 77\n"
"      --reps N       time each size N times, interleaved, and report the\n"
"                     median; with N > 1 one untimed warm-up pass comes first\n"
"                     and tsv and csv add the columns real_s_min, real_s_max\n"
"\n"
"outfile must not be the file on standard input, by any name: every pass\n"
"truncates outfile, so an interrupted run would destroy the input.  That is\n"
"refused with exit 1 before anything is written.\n"
"\n"
"outfile is opened by name, as the seed's `timewrite <outfile>' was: a\n"
"symbolic link is followed, and the file it names is truncated and written;\n"
"a FIFO or a device is written without rewinding (a FIFO waits for its\n"
"reader).  That is the seed's contract, kept on purpose: do not name a link\n"
"you did not make.\n"
"\n"
"Exit status: 0 success, 1 run-time error, 2 bad usage, 77 mechanism\n"
"unsupported on this machine (nothing is written).\n",
	    tw_mechanism, (int)(sizeof(void *) * 8));
	tw_help_exit();
}

static void
add_size(struct row **rows, size_t *n, size_t *cap, long long size)
{
	struct row *r;

	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		if ((r = reallocarray(*rows, *cap, sizeof(**rows))) == NULL)
			err(1, NULL);
		*rows = r;
	}
	memset(&(*rows)[*n], 0, sizeof(**rows));
	(*rows)[(*n)++].size = size;
}

#define SIZES_WANT "(want positive integers and MIN-MAX ranges, e.g. " \
	"256,1024 or 1-65536)"

/* One size of a --sizes list, or a usage error quoting it. */
static long long
list_size(const char *s)
{
	const char *errstr;
	long long v;

	v = tw_strtonum(s, 1, LLONG_MAX, &errstr);
	if (errstr != NULL)
		tw_usage_err("--sizes: %s is %s " SIZES_WANT, tw_quote(s),
		    errstr);
	return v;
}

/*
 * A size list is comma-separated items, each a size or MIN-MAX.  A range
 * doubles from MIN while the value stays at or below MAX, so 1-65536 is the
 * 17 powers of two and 256-131072 the seed's ten sizes.  Every number goes
 * through tw_strtonum whole: the list is cut at ',' and '-' first, and a
 * size has no sign, so each '-' can only separate MIN from MAX.  Anything
 * malformed is a usage error.
 */
static void
parse_sizes(const char *list, struct row **rows, size_t *n)
{
	char *copy, *p, *item, *dash;
	long long lo, hi, s;
	size_t cap = 0;

	*rows = NULL;
	*n = 0;
	if ((copy = strdup(list)) == NULL)
		err(1, NULL);
	p = copy;
	while ((item = strsep(&p, ",")) != NULL) {
		if (*item == '\0')
			tw_usage_err("--sizes: %s has an empty item",
			    tw_quote(list));
		if ((dash = strchr(item, '-')) == NULL) {
			add_size(rows, n, &cap, list_size(item));
			continue;
		}
		/* "-256" and "256-" have no number on one side. */
		if (dash == item || dash[1] == '\0')
			tw_usage_err("--sizes: %s is invalid " SIZES_WANT,
			    tw_quote(item));
		*dash = '\0';
		lo = list_size(item);
		hi = list_size(dash + 1);
		if (hi < lo)
			tw_usage_err("--sizes: the range %lld-%lld runs "
			    "backwards (want MIN-MAX with MIN <= MAX)", lo, hi);
		for (s = lo; s <= hi; s *= 2) {
			add_size(rows, n, &cap, s);
			if (s > LLONG_MAX / 2)
				break;
		}
	}
	free(copy);
}

static void __attribute__((noreturn))
refuse_input(uint64_t len, int error)
{
	errx(1, "stdin: cannot hold the %llu-byte input in memory this %d-bit "
	    "%s variant can pass to the kernel (%s); nothing was written",
	    (unsigned long long)len, (int)(sizeof(void *) * 8), tw_mechanism,
	    strerror(error));
}

/*
 * One read of stdin into buf, at most room bytes (and at most MAX_CHUNK):
 * what it read, 0 at EOF.  An interrupted read is retried; any other error
 * ends the program.
 */
static ssize_t
read_chunk(char *buf, size_t room)
{
	ssize_t r;

	if (room > MAX_CHUNK)
		room = MAX_CHUNK;
	while ((r = read(STDIN_FILENO, buf, room)) == -1) {
		if (errno != EINTR)
			err(1, "stdin");
	}
	return r;
}

/*
 * Read a regular file whole, at the size it has now, straight into a
 * tw_alloc() buffer.  A file that grows meanwhile is read up to that size;
 * one that shrinks is read up to its end.
 */
static void
read_sized(struct input *in, uint64_t size)
{
	ssize_t r;
	size_t got;

	if (size > SIZE_MAX)
		refuse_input(size, EFBIG);
	if ((in->buf = tw_alloc((size_t)size)) == NULL)
		refuse_input(size, errno);
	in->alloc = (size_t)size;
	got = 0;
	while (got < (size_t)size && (r = read_chunk(in->buf + got,
	    (size_t)size - got)) > 0)
		got += (size_t)r;
	in->len = got;
}

/*
 * Read a pipe, terminal or device until EOF.  The length is unknown, so read
 * into ordinary memory that realloc can grow (in place, by mremap, once it is
 * large), then copy once into a tw_alloc() buffer of the exact size.  Growing
 * a tw_alloc() buffer directly would need the old and new buffers at once in
 * what may be a small window (MAP_32BIT gives 64-bit int 0x80 about 1 GiB).
 */
static void
read_stream(struct input *in)
{
	char *tmp, *p;
	size_t cap, len, step;
	ssize_t r;

	cap = STREAM_START;
	len = 0;
	if ((tmp = malloc(cap)) == NULL)
		refuse_input(cap, errno);
	for (;;) {
		if (len == cap) {
			/*
			 * Double; when that fails, try ever smaller steps
			 * before giving up, so that the input that fits is
			 * not refused for the sake of a doubling.
			 */
			for (step = cap, p = NULL; p == NULL; step /= 4) {
				if (step < STREAM_START)
					refuse_input((uint64_t)cap + 1, ENOMEM);
				if (cap <= SIZE_MAX - step)
					p = realloc(tmp, cap + step);
				if (p != NULL)
					cap += step;
			}
			tmp = p;
		}
		if ((r = read_chunk(tmp + len, cap - len)) == 0)
			break;
		len += (size_t)r;
	}
	if ((in->buf = tw_alloc(len)) == NULL)
		refuse_input(len, errno);
	memcpy(in->buf, tmp, len);
	free(tmp);
	in->len = len;
	in->alloc = len;
}

/*
 * Refuse to write to the file standard input reads, by whatever name (the
 * same path, a hard link, a symbolic link).  The input is in memory before
 * outfile is opened, but every pass truncates outfile first, so a run that is
 * interrupted or stopped by a write error would leave the only copy of the
 * data cut short: `timewrite f <f', killed, once left 2.5 MB of a 20 MB f.
 * Exit 1, as cat(1) does for "input file is output file": the command line
 * is well formed, it is the files it names that cannot be used together.
 * Only a regular file holds data to lose; /dev/null on both sides is
 * harmless and allowed.
 */
static void
refuse_input_as_output(const struct stat *in, const struct stat *out,
    const char *path)
{
	if (S_ISREG(in->st_mode) && S_ISREG(out->st_mode) &&
	    in->st_dev == out->st_dev && in->st_ino == out->st_ino)
		errx(1, "%s: is the file on standard input; writing it would "
		    "destroy the input (nothing was written)", path);
}

static void
read_input(struct input *in)
{
	struct stat st;
	off_t pos;

	if (fstat(STDIN_FILENO, &st) == -1) {
		if (errno == EBADF)
			errx(1, "stdin is closed: give the data on standard "
			    "input (timewrite outfile <infile)");
		err(1, "stdin");
	}
	/*
	 * procfs and sysfs files are regular but report size 0, so only a
	 * non-empty regular file is trusted to know its length.  Reading
	 * starts where stdin is positioned, as read() would.
	 */
	if (S_ISREG(st.st_mode) && st.st_size > 0) {
		if ((pos = lseek(STDIN_FILENO, 0, SEEK_CUR)) == -1)
			err(1, "stdin");
		read_sized(in, pos < st.st_size ?
		    (uint64_t)(st.st_size - pos) : 0);
	} else
		read_stream(in);
}

static double
tv_seconds(const struct timeval *a, const struct timeval *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	    (double)(b->tv_usec - a->tv_usec) / 1e6;
}

static double
ts_seconds(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	    (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/*
 * Start a pass from an empty file.  Outside the timed region: the seed's
 * rewind is set-up, not part of what is measured.
 */
static void
rewind_out(int fd, const char *path, int regular)
{
	if (lseek(fd, 0, SEEK_SET) == -1 && errno != ESPIPE)
		err(1, "%s", path);
	if (regular && ftruncate(fd, 0) == -1)
		err(1, "%s", path);
}

/*
 * Write the whole input in chunks of `size` through the linked mechanism and
 * return the number of write() calls issued.  A short write is continued
 * with the rest of its chunk, so chunks stay aligned on multiples of `size`
 * as in the seed, and nothing is skipped.  This loop is what is timed, so it
 * does nothing but call the kernel and account for the answer.
 */
static uint64_t
write_all(int fd, const char *path, const struct input *in, long long size)
{
	uint64_t calls = 0;
	size_t off = 0, end, n;
	long r;

	while (off < in->len) {
		end = in->len - off;
		if ((unsigned long long)end > (unsigned long long)size)
			end = (size_t)size;
		end += off;
		while (off < end) {
			n = end - off;
			if (n > MAX_CHUNK)
				n = MAX_CHUNK;
			r = tw_syscall3(TW_NR_write, fd,
			    (long)(in->buf + off), (long)n);
			calls++;
			if (r < 0) {
				if (r == -EINTR)
					continue;
				errno = (int)-r;
				err(1, "%s", path);
			}
			if (r == 0)
				errx(1, "%s: write() of %zu bytes wrote nothing",
				    path, n);
			off += (size_t)r;
		}
	}
	return calls;
}

/* One pass at one size: rewind, then time the writes (and fsync). */
static void
pass(int fd, const char *path, int regular, int dofsync,
    const struct input *in, struct row *row, int rep)
{
	struct rusage ru0, ru1;
	struct timespec t0, t1;
	uint64_t calls;

	rewind_out(fd, path, regular);
	if (getrusage(RUSAGE_SELF, &ru0) == -1)
		err(1, "getrusage");
	if (clock_gettime(CLOCK_MONOTONIC, &t0) == -1)
		err(1, "clock_gettime");
	calls = write_all(fd, path, in, row->size);
	if (dofsync && fsync(fd) == -1)
		err(1, "%s: fsync", path);
	if (clock_gettime(CLOCK_MONOTONIC, &t1) == -1)
		err(1, "clock_gettime");
	if (getrusage(RUSAGE_SELF, &ru1) == -1)
		err(1, "getrusage");
	if (rep < 0)
		return;		/* the warm-up is not recorded */
	if (rep > 0 && calls != row->calls)
		row->calls_varied = 1;
	if (calls > row->calls)
		row->calls = calls;
	row->user[rep] = tv_seconds(&ru0.ru_utime, &ru1.ru_utime);
	row->sys[rep] = tv_seconds(&ru0.ru_stime, &ru1.ru_stime);
	row->real[rep] = ts_seconds(&t0, &t1);
}

static void
print_header(enum format fmt, int reps)
{
	if (fmt == FMT_CSV)
		printf("buffsize,user_s,sys_s,real_s,calls%s\n",
		    reps > 1 ? ",real_s_min,real_s_max" : "");
}

/* One tsv or csv row, printed as soon as its last sample is taken. */
static void
print_row(enum format fmt, const struct row *row, int reps)
{
	double um, sm, rm, lo, hi, rmin, rmax;
	char sep = fmt == FMT_CSV ? ',' : '\t';

	tw_summarize(row->user, reps, &um, &lo, &hi);
	tw_summarize(row->sys, reps, &sm, &lo, &hi);
	tw_summarize(row->real, reps, &rm, &rmin, &rmax);
	printf("%lld%c%.9f%c%.9f%c%.9f%c%llu", row->size, sep, um, sep, sm,
	    sep, rm, sep, (unsigned long long)row->calls);
	if (reps > 1)
		printf("%c%.9f%c%.9f", sep, rmin, sep, rmax);
	putchar('\n');
	if (fflush(stdout) == EOF)
		err(1, "stdout");
}

static void
print_json(const char *path, const char *mode, int dofsync,
    const struct input *in, const struct row *rows, size_t nrows, int reps)
{
	double um, sm, rm, lo, hi, rmin, rmax;
	size_t i;

	printf("{\"program\":\"timewrite\",\"mechanism\":");
	json_string(tw_mechanism);
	printf(",\"bits\":%d,\"outfile\":", (int)(sizeof(void *) * 8));
	json_string(path);
	printf(",\"mode\":\"%s\",\"fsync\":%s,\"input_bytes\":%llu,"
	    "\"reps\":%d,\"rows\":[", mode, dofsync ? "true" : "false",
	    (unsigned long long)in->len, reps);
	for (i = 0; i < nrows; i++) {
		tw_summarize(rows[i].user, reps, &um, &lo, &hi);
		tw_summarize(rows[i].sys, reps, &sm, &lo, &hi);
		tw_summarize(rows[i].real, reps, &rm, &rmin, &rmax);
		printf("%s{\"buffsize\":%lld,\"calls\":%llu,\"user_s\":%.9f,"
		    "\"sys_s\":%.9f,\"real_s\":%.9f,\"real_s_min\":%.9f,"
		    "\"real_s_max\":%.9f,\"samples\":{", i ? "," : "",
		    rows[i].size, (unsigned long long)rows[i].calls, um, sm, rm,
		    rmin, rmax);
		json_arrays(reps, 9, "user_s", rows[i].user, "sys_s",
		    rows[i].sys, "real_s", rows[i].real, (char *)NULL);
		printf("}}");
	}
	printf("]}\n");
}

int
main(int argc, char *argv[])
{
	static const char *const format_words[] = { "tsv", "csv", "json" };
	static const enum format formats[] = { FMT_TSV, FMT_CSV, FMT_JSON };
	static const struct option longopts[] = {
		{ "dsync",	no_argument,		NULL,	OPT_DSYNC },
		{ "format",	required_argument,	NULL,	OPT_FORMAT },
		{ "fsync",	no_argument,		NULL,	OPT_FSYNC },
		{ "help",	no_argument,		NULL,	OPT_HELP },
		{ "probe",	no_argument,		NULL,	OPT_PROBE },
		{ "reps",	required_argument,	NULL,	OPT_REPS },
		{ "sizes",	required_argument,	NULL,	OPT_SIZES },
		{ NULL,		0,			NULL,	0 }
	};
	struct input in = { NULL, 0, 0 };
	struct row *rows = NULL;
	struct stat st, in_st;
	enum format fmt = FMT_TSV;
	const char *path, *mode, *sizes = NULL;
	size_t nrows, i;
	int ch, dsync = 0, dofsync = 0, osync = 0, probe = 0, reps = 1;
	int fd, flags, regular, rep, have_in;

	/* Past RLIMIT_FSIZE write() must fail with EFBIG, not kill us. */
	signal(SIGXFSZ, SIG_IGN);

	/*
	 * The output file is opened after the input is read, so the lowest
	 * free descriptor must not be one of the standard three: a closed
	 * stderr would otherwise receive our data file's descriptor and error
	 * messages would go into it.  A closed stdin or stdout is an error
	 * reported below; a closed stderr gets /dev/null.
	 */
	if (fcntl(STDERR_FILENO, F_GETFD) == -1 &&
	    open("/dev/null", O_WRONLY) != STDERR_FILENO)
		exit(1);

	/* getopt's own messages name argv[0]; ours name __progname, as err does. */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, ":b:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'b':
		case OPT_SIZES:
			sizes = optarg;
			break;
		case OPT_DSYNC:
			dsync = 1;
			break;
		case OPT_FORMAT:
			fmt = formats[tw_word_arg("--format", optarg,
			    format_words, 3)];
			break;
		case 'h':
		case OPT_HELP:
			help();
		case OPT_PROBE:
			probe = 1;
			break;
		case OPT_REPS:
			reps = (int)tw_int_arg("--reps", optarg, 1, INT_MAX);
			break;
		case OPT_FSYNC:
			dofsync = 1;
			break;
		default:
			tw_usage_getopt(ch, argv);
		}
	}
	argc -= optind;
	argv += optind;

	/* --probe needs no outfile, but a given one must still be valid. */
	if (argc == 0 && !probe)
		tw_usage_err("missing outfile");
	if (argc > 2)
		tw_usage_err("too many arguments: %s after outfile and "
		    "sync", tw_quote(argv[2]));
	if (argc == 2) {
		if (strcmp(argv[1], "sync") != 0)
			tw_usage_err("%s after outfile: the only word allowed "
			    "there is 'sync'", tw_quote(argv[1]));
		osync = 1;
	}
	path = argc > 0 ? argv[0] : NULL;
	parse_sizes(sizes != NULL ? sizes : SEED_SIZES, &rows, &nrows);

	/* An unsupported mechanism exits 77 here, before any file exists. */
	tw_require_mechanism();
	if (probe)
		return 0;

	if (fcntl(STDOUT_FILENO, F_GETFD) == -1)
		errx(1, "stdout is closed: the rows have nowhere to go");
	for (i = 0; i < nrows; i++) {
		rows[i].user = calloc(reps, sizeof(double));
		rows[i].sys = calloc(reps, sizeof(double));
		rows[i].real = calloc(reps, sizeof(double));
		if (rows[i].user == NULL || rows[i].sys == NULL ||
		    rows[i].real == NULL)
			err(1, NULL);
	}

	/*
	 * Is outfile the file standard input reads?  Asked once of the path
	 * before anything is read or opened, so that the usual mistake costs
	 * nothing, and once more of the descriptor after open() (below), which
	 * is the check that counts: a rename between the two cannot get past
	 * it.  A closed stdin is reported by read_input.
	 */
	have_in = fstat(STDIN_FILENO, &in_st) == 0;
	if (have_in && stat(path, &st) == 0)
		refuse_input_as_output(&in_st, &st, path);

	/* All of the input is in memory before the output exists. */
	read_input(&in);

	/*
	 * No O_TRUNC: a file is cut only once the descriptor has passed the
	 * check above.  Every pass starts with rewind_out's ftruncate, so the
	 * file still ends exactly as long as the input.
	 *
	 * O_LARGEFILE matters to the 32-bit variants: the compat open()
	 * does not add it, and without it a write past 2 GiB fails with
	 * EFBIG.  glibc adds it too under _FILE_OFFSET_BITS=64; say so here.
	 */
	flags = O_WRONLY | O_CREAT | O_LARGEFILE | O_CLOEXEC;
	if (osync)
		flags |= O_SYNC;
	if (dsync)
		flags |= O_DSYNC;
	mode = osync ? "sync" : dsync ? "dsync" : "async";
	if ((fd = open(path, flags, 0666)) == -1)
		err(1, "%s", path);
	if (fstat(fd, &st) == -1)
		err(1, "%s", path);
	if (have_in)
		refuse_input_as_output(&in_st, &st, path);
	regular = S_ISREG(st.st_mode);

	if (fmt != FMT_JSON)
		print_header(fmt, reps);
	if (reps > 1)
		pass(fd, path, regular, dofsync, &in, &rows[0], -1);
	for (rep = 0; rep < reps; rep++) {
		for (i = 0; i < nrows; i++) {
			pass(fd, path, regular, dofsync, &in, &rows[i], rep);
			if (rep == reps - 1 && fmt != FMT_JSON)
				print_row(fmt, &rows[i], reps);
		}
	}
	if (close(fd) == -1)
		err(1, "%s", path);
	if (fmt == FMT_JSON)
		print_json(path, mode, dofsync, &in, rows, nrows, reps);
	for (i = 0; i < nrows; i++)
		if (rows[i].calls_varied)
			warnx("%s: the number of write() calls at %lld bytes "
			    "varied between passes; the largest is reported",
			    path, rows[i].size);
	tw_flush_stdout();

	tw_free(in.buf, in.alloc);
	for (i = 0; i < nrows; i++) {
		free(rows[i].user);
		free(rows[i].sys);
		free(rows[i].real);
	}
	free(rows);
	return 0;
}
