/*
 * wvbench: what fewer kernel entries buy, measured two ways (seeds 3 and 4).
 *
 *   wvbench writev --buffers N --size S [--reps R] [--file PATH]
 *	N write() calls of S bytes each against writev() of the same N
 *	buffers.  writev takes at most IOV_MAX buffers per call, so N above
 *	sysconf(_SC_IOV_MAX) is split into ceil(N / IOV_MAX) writev calls; the
 *	seed's blog post warned never to exceed IOV_MAX, and this is how a
 *	program that must do so copes.
 *
 *   wvbench stdio --bytes B [--method write|fwrite|fputc|putc_unlocked]
 *	    [--reps R] [--file PATH]
 *	B bytes to a file one byte per call: write(fd, &c, 1), fwrite(&c, 1,
 *	1, fp), fputc(c, fp) or putc_unlocked(c, fp).  stdio buffers in user
 *	space and enters the kernel only when its buffer fills; the write()
 *	calls each method really issued are counted from the kernel's own
 *	per-task counter (syscw in /proc/self/io), not computed.
 *
 * Why a separate program: both questions are about the C library (stdio
 * buffering, the writev wrapper), so wvbench is built against libc only, as
 * build/wvbench-64 and build/wvbench-32, and has no mechanism stub.
 *
 * Timing: CLOCK_MONOTONIC around each sample; stdio also reports user and
 * system time from getrusage(RUSAGE_SELF).  The methods are interleaved
 * within each repetition, and the order alternates from one repetition to
 * the next, so drift (page cache state, frequency, a noisy neighbour) falls
 * on every method alike.  One unrecorded warm-up pass of each method comes
 * first: it allocates the file's blocks, so the timed passes overwrite
 * cached pages and never extend the file.
 *
 * A writev sample writes N*S bytes `inner` times at successive offsets (the
 * file is rewound, outside the timed region, before each sample); `inner` is
 * chosen so a sample holds at least MIN_CALLS write() calls, keeping the
 * clock's own cost (tens of ns) well under 1% of a sample.  Reported times
 * are nanoseconds for ONE set of N buffers (the sample divided by inner).
 *
 * Output: one JSON object on stdout.  Exit 2 on bad usage, 1 on a run-time
 * error.  Numbers on the command line are read by tw_cli.c, as timewrite's
 * and syscost's are.
 */
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json_out.h"
#include "tw_cli.h"

#define MIN_CALLS	256		/* write() calls per writev sample, at least */
#define MAX_BUFFERS	(1L << 20)
#define MAX_SIZE	(1L << 24)
#define MAX_TOTAL	(1L << 28)	/* N*S: one set of buffers in memory */
#define MAX_REPS	100000L
#define MAX_BYTES	(1LL << 32)

const char tw_usage[] =
    "usage: wvbench writev --buffers n --size s [--reps r] [--file path]\n"
    "       wvbench stdio --bytes b [--method write|fwrite|fputc|putc_unlocked]\n"
    "               [--reps r] [--file path]\n"
    "       wvbench -h";

/* Long options' vals, clear of the short letters (see tw_usage_getopt). */
enum {
	OPT_BUFFERS = TW_LONGOPT, OPT_SIZE, OPT_BYTES, OPT_METHOD, OPT_REPS,
	OPT_FILE, OPT_HELP
};

static void __attribute__((noreturn))
help(void)
{
	printf("%s\n\n", tw_usage);
	printf(
"writev: n write() calls of s bytes each against writev() of the same n\n"
"buffers, split into IOV_MAX-sized calls when n is larger.\n"
"stdio: b bytes to a file one byte per call, by write() and by stdio\n"
"(fwrite, fputc, putc_unlocked; give --method again to pick several).\n"
"Both print one JSON object; the file is a temporary one unless --file.\n"
"\n"
"Exit status: 0 measured, 1 run-time error, 2 bad usage.\n");
	tw_help_exit();
}

/*
 * The options after the command; getopt_long starts at argv[1].  Every
 * command ends its table with the options they all have, which next_opt
 * takes itself: --reps, --file and --help.
 */
#define COMMON_OPTS \
	{ "reps",	required_argument,	NULL,	OPT_REPS }, \
	{ "file",	required_argument,	NULL,	OPT_FILE }, \
	{ "help",	no_argument,		NULL,	OPT_HELP }, \
	{ NULL,		0,			NULL,	0 }
static const struct option writev_opts[] = {
	{ "buffers",	required_argument,	NULL,	OPT_BUFFERS },
	{ "size",	required_argument,	NULL,	OPT_SIZE },
	COMMON_OPTS
};
static const struct option stdio_opts[] = {
	{ "bytes",	required_argument,	NULL,	OPT_BYTES },
	{ "method",	required_argument,	NULL,	OPT_METHOD },
	COMMON_OPTS
};

/*
 * The next option of a command, with the errors every command shares; the
 * options every command has, --reps and --file, are taken here (into *reps
 * and *path) and not returned.
 */
static int
next_opt(int argc, char *argv[], const struct option *opts, long *reps,
    const char **path)
{
	int ch;

	opterr = 0;
again:
	ch = getopt_long(argc, argv, ":h", opts, NULL);
	switch (ch) {
	case 'h':
	case OPT_HELP:
		help();
	case OPT_REPS:
		*reps = tw_int_arg("--reps", optarg, 1, MAX_REPS);
		goto again;
	case OPT_FILE:
		if (*optarg == '\0')
			tw_usage_err("--file: empty path");
		*path = optarg;
		goto again;
	case ':':
	case '?':
		tw_usage_getopt(ch, argv);
	case -1:
		if (optind < argc)
			tw_usage_err("%s: unexpected argument %s", argv[0],
			    tw_quote(argv[optind]));
		break;
	}
	return ch;
}

static double
now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1)
		err(1, "clock_gettime");
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static double
tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Default output file: a temporary file, unlinked at exit. */
static char *tmpname;

static void
unlink_tmp(void)
{
	if (tmpname != NULL)
		unlink(tmpname);
}

/*
 * The one way wvbench opens a path it writes: never through a symbolic link
 * (O_NOFOLLOW: ELOOP before anything is created through it), never a FIFO or
 * device (O_NONBLOCK keeps a FIFO without a reader from hanging the open; the
 * S_ISREG check refuses the rest), as syscost's --file does.
 */
static int
open_regular(const char *path, int flags)
{
	struct stat st;
	int fd, fl;

	fd = open(path, flags | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
	if (fd == -1 && errno == ELOOP)
		errx(1, "--file %s: a symbolic link; wvbench writes only to a regular "
		    "file, not through a link", tw_quote(path));
	if (fd == -1 && errno == ENXIO)
		errx(1, "--file %s: not a regular file (a FIFO or socket)", tw_quote(path));
	if (fd == -1)
		err(1, "%s", tw_quote(path));
	if (fstat(fd, &st) == -1)
		err(1, "fstat %s", tw_quote(path));
	if (!S_ISREG(st.st_mode))
		errx(1, "--file %s: not a regular file", tw_quote(path));
	if ((fl = fcntl(fd, F_GETFL)) == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1)
		err(1, "fcntl %s", tw_quote(path));
	return fd;
}

static int
open_out(const char *path, char **name)
{
	int fd;

	if (path != NULL) {
		fd = open_regular(path, O_WRONLY);
		*name = strdup(path);
	} else {
		const char *dir = getenv("TMPDIR");

		if (dir == NULL || *dir == '\0')
			dir = "/tmp";
		if (asprintf(&tmpname, "%s/wvbench.XXXXXX", dir) == -1)
			err(1, "asprintf");
		if ((fd = mkstemp(tmpname)) == -1)
			err(1, "mkstemp %s", tmpname);
		atexit(unlink_tmp);
		*name = strdup(tmpname);
	}
	if (*name == NULL)
		err(1, "strdup");
	return fd;
}

static void
rewind_fd(int fd)
{
	if (lseek(fd, 0, SEEK_SET) == -1)
		err(1, "lseek");
}

/* Write all of buf with write(); a short write is continued, and counted. */
static long
write_all(int fd, const char *buf, size_t len)
{
	long calls = 0;
	ssize_t n;

	while (len > 0) {
		calls++;
		if ((n = write(fd, buf, len)) == -1) {
			if (errno == EINTR)
				continue;
			err(1, "write");
		}
		buf += n;
		len -= (size_t)n;
	}
	return calls;
}

/*
 * writev() all of iov[0..cnt), at most iovmax buffers per call.  A short
 * writev is continued from where it stopped.  iov is modified on a short
 * write (only then), so the caller passes a scratch copy.
 */
static long
writev_all(int fd, struct iovec *iov, long cnt, long iovmax)
{
	long calls = 0;
	ssize_t n;

	while (cnt > 0) {
		int k = (int)(cnt < iovmax ? cnt : iovmax);

		calls++;
		if ((n = writev(fd, iov, k)) == -1) {
			if (errno == EINTR)
				continue;
			err(1, "writev");
		}
		/* Skip what was written; adjust a partly written buffer. */
		while (cnt > 0 && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov++;
			cnt--;
		}
		if (cnt > 0 && n > 0) {
			iov->iov_base = (char *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return calls;
}

static int
cmd_writev(int argc, char *argv[])
{
	long nbuf = -1, size = -1, reps = 11, iovmax, inner, i, r, k;
	long write_calls = 0, writev_calls = 0, wc, vc;
	const char *path = NULL;
	char *name, *data;
	struct iovec *iov, *scratch;
	double *t_write, *t_writev, t0;
	int fd, ch;

	while ((ch = next_opt(argc, argv, writev_opts, &reps, &path)) != -1) {
		switch (ch) {
		case OPT_BUFFERS:
			nbuf = tw_int_arg("--buffers", optarg, 1, MAX_BUFFERS);
			break;
		case OPT_SIZE:
			size = tw_int_arg("--size", optarg, 1, MAX_SIZE);
			break;
		}
	}
	if (nbuf < 0 || size < 0)
		tw_usage_err("writev: --buffers and --size are required");
	if ((long long)nbuf * size > MAX_TOTAL)
		tw_usage_err("--buffers x --size is %lld bytes; at most %ld",
		    (long long)nbuf * size, MAX_TOTAL);
	errno = 0;
	if ((iovmax = sysconf(_SC_IOV_MAX)) == -1) {
		if (errno != 0)
			err(1, "sysconf(_SC_IOV_MAX)");
		iovmax = 16;	/* POSIX minimum when there is no limit */
	}
	inner = (MIN_CALLS + nbuf - 1) / nbuf;

	if ((data = malloc((size_t)(nbuf * size))) == NULL ||
	    (iov = calloc((size_t)nbuf, sizeof(*iov))) == NULL ||
	    (scratch = calloc((size_t)nbuf, sizeof(*iov))) == NULL ||
	    (t_write = calloc((size_t)reps, sizeof(double))) == NULL ||
	    (t_writev = calloc((size_t)reps, sizeof(double))) == NULL)
		err(1, "malloc");
	for (i = 0; i < nbuf * size; i++)
		data[i] = (char)('a' + i % 26);
	for (i = 0; i < nbuf; i++) {
		iov[i].iov_base = data + i * size;
		iov[i].iov_len = (size_t)size;
	}
	fd = open_out(path, &name);

	/*
	 * r == -1 is the warm-up.  Even repetitions run write() first, odd
	 * ones writev() first.
	 */
	for (r = -1; r < reps; r++) {
		int m;

		for (m = 0; m < 2; m++) {
			int use_writev = (m ^ (int)(r & 1)) != 0;

			rewind_fd(fd);
			wc = vc = 0;
			if (use_writev) {
				t0 = now_ns();
				for (k = 0; k < inner; k++) {
					memcpy(scratch, iov,
					    (size_t)nbuf * sizeof(*iov));
					vc += writev_all(fd, scratch, nbuf,
					    iovmax);
				}
				if (r >= 0)
					t_writev[r] = (now_ns() - t0) / inner;
			} else {
				t0 = now_ns();
				for (k = 0; k < inner; k++)
					for (i = 0; i < nbuf; i++)
						wc += write_all(fd,
						    data + i * size,
						    (size_t)size);
				if (r >= 0)
					t_write[r] = (now_ns() - t0) / inner;
			}
			if (r >= 0) {
				write_calls += wc;
				writev_calls += vc;
			}
		}
	}
	if (close(fd) == -1)
		err(1, "close");

	/*
	 * The memcpy of the iovec array is in the writev timing: it is what
	 * a program that may see short writes must do.  It costs about
	 * 16 bytes per buffer, next to the S bytes the kernel copies.
	 */
	printf("{\"program\":\"wvbench\",\"bench\":\"writev\",\"bits\":%d,",
	    (int)(sizeof(void *) * 8));
	printf("\"n_buffers\":%ld,\"size\":%ld,\"reps\":%ld,\"inner\":%ld,",
	    nbuf, size, reps, inner);
	printf("\"iov_max\":%ld,\"file\":", iovmax);
	json_string(name);
	printf(",\"write_calls_per_op\":%.3f,\"writev_calls_per_op\":%.3f,",
	    (double)write_calls / (double)(reps * inner),
	    (double)writev_calls / (double)(reps * inner));
	printf("\"unit\":\"ns per set of n_buffers buffers\",\"samples\":{");
	json_arrays(reps, 1, "write_ns", t_write, "writev_ns", t_writev,
	    (char *)NULL);
	printf("}}\n");
	free(name);
	return 0;
}

/* The kernel's count of write-family system calls by this task. */
static long long
syscw(void)
{
	char line[128];
	long long v = -1;
	FILE *fp;

	if ((fp = fopen("/proc/self/io", "r")) == NULL)
		return -1;
	/* fopen/fgets read; they never write, so syscw is not disturbed. */
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "syscw: %lld", &v) == 1)
			break;
	fclose(fp);
	return v;
}

enum method { M_WRITE, M_FWRITE, M_FPUTC, M_PUTC_UNLOCKED, M_COUNT };
static const char *method_name[M_COUNT] = {
	"write", "fwrite", "fputc", "putc_unlocked"
};

struct stdio_result {
	double	 *real, *user, *sys;
	long long calls;	/* write() calls of the last pass; -1 unknown */
};

/*
 * One pass: B bytes, one byte per call, through `m`.  The stream's fclose()
 * is inside the timed region: the last buffer's write() is part of the cost.
 */
static void
stdio_pass(enum method m, const char *path, long long bytes, double *real,
    double *user, double *sys, long long *calls)
{
	struct rusage ru0, ru1;
	long long i, c0, c1;
	double t0;
	FILE *fp = NULL;
	int fd = -1;
	char c;

	/* Open outside the timing: opening is not what is compared. */
	if (m == M_WRITE)
		fd = open_regular(path, O_WRONLY);
	else if ((fp = fdopen(open_regular(path, O_RDWR), "r+")) == NULL)
		err(1, "fdopen %s", tw_quote(path));

	c0 = syscw();
	if (getrusage(RUSAGE_SELF, &ru0) == -1)
		err(1, "getrusage");
	t0 = now_ns();
	switch (m) {
	case M_WRITE:
		for (i = 0; i < bytes; i++) {
			c = (char)('a' + i % 26);
			if (write(fd, &c, 1) != 1)
				err(1, "write");
		}
		if (close(fd) == -1)
			err(1, "close");
		break;
	case M_FWRITE:
		for (i = 0; i < bytes; i++) {
			c = (char)('a' + i % 26);
			if (fwrite(&c, 1, 1, fp) != 1)
				err(1, "fwrite");
		}
		break;
	case M_FPUTC:
		for (i = 0; i < bytes; i++)
			if (fputc('a' + (int)(i % 26), fp) == EOF)
				err(1, "fputc");
		break;
	case M_PUTC_UNLOCKED:
		for (i = 0; i < bytes; i++)
			if (putc_unlocked('a' + (int)(i % 26), fp) == EOF)
				err(1, "putc_unlocked");
		break;
	default:
		abort();
	}
	if (fp != NULL && fclose(fp) == EOF)
		err(1, "fclose");
	*real = (now_ns() - t0) / 1e9;
	if (getrusage(RUSAGE_SELF, &ru1) == -1)
		err(1, "getrusage");
	c1 = syscw();
	*user = tv_s(ru1.ru_utime) - tv_s(ru0.ru_utime);
	*sys = tv_s(ru1.ru_stime) - tv_s(ru0.ru_stime);
	*calls = (c0 < 0 || c1 < 0) ? -1 : c1 - c0;
}

static int
cmd_stdio(int argc, char *argv[])
{
	struct stdio_result res[M_COUNT];
	long long bytes = -1;
	long reps = 5, r, i;
	int use[M_COUNT] = { 1, 1, 1, 1 }, nm = 0, order[M_COUNT], j, fd, ch;
	const char *path = NULL;
	char *name;
	struct stat st;

	while ((ch = next_opt(argc, argv, stdio_opts, &reps, &path)) != -1) {
		switch (ch) {
		case OPT_BYTES:
			bytes = tw_int_arg("--bytes", optarg, 1, MAX_BYTES);
			break;
		case OPT_METHOD:
			for (j = 0; j < M_COUNT; j++)
				if (strcmp(optarg, method_name[j]) == 0)
					break;
			if (j == M_COUNT)
				tw_usage_err("--method: unknown method %s (write, "
				    "fwrite, fputc, putc_unlocked)", tw_quote(optarg));
			if (nm == 0)
				memset(use, 0, sizeof(use));
			use[j] = 1;
			nm++;
			break;
		}
	}
	if (bytes < 0)
		tw_usage_err("stdio: --bytes is required");

	fd = open_out(path, &name);
	if (fstat(fd, &st) == -1)
		err(1, "fstat");
	if (close(fd) == -1)
		err(1, "close");

	for (nm = 0, j = 0; j < M_COUNT; j++) {
		if (!use[j])
			continue;
		order[nm++] = j;
		if ((res[j].real = calloc((size_t)reps, sizeof(double))) ==
		    NULL || (res[j].user = calloc((size_t)reps,
		    sizeof(double))) == NULL || (res[j].sys =
		    calloc((size_t)reps, sizeof(double))) == NULL)
			err(1, "calloc");
	}

	/* r == -1: warm-up.  The order rotates by one each repetition. */
	for (r = -1; r < reps; r++) {
		for (i = 0; i < nm; i++) {
			enum method m = (enum method)order[(i + (r + 1)) % nm];
			double re, us, sy;
			long long calls;

			stdio_pass(m, name, bytes, &re, &us, &sy, &calls);
			if (r < 0)
				continue;
			res[m].real[r] = re;
			res[m].user[r] = us;
			res[m].sys[r] = sy;
			res[m].calls = calls;
		}
	}

	printf("{\"program\":\"wvbench\",\"bench\":\"stdio\",\"bits\":%d,",
	    (int)(sizeof(void *) * 8));
	printf("\"bytes\":%lld,\"reps\":%ld,\"bufsiz\":%d,\"st_blksize\":%ld,"
	    "\"file\":", bytes, reps, BUFSIZ, (long)st.st_blksize);
	json_string(name);
	printf(",\"calls_source\":\"%s\",\"methods\":[",
	    syscw() < 0 ? "none: /proc/self/io is unreadable" :
	    "syscw in /proc/self/io");
	for (i = 0; i < nm; i++) {
		j = order[i];
		printf("%s{\"method\":\"%s\",", i ? "," : "", method_name[j]);
		if (res[j].calls < 0)
			printf("\"calls\":null,");
		else
			printf("\"calls\":%lld,", res[j].calls);
		printf("\"samples\":{");
		json_arrays(reps, 9, "real_s", res[j].real, "user_s",
		    res[j].user, "sys_s", res[j].sys, (char *)NULL);
		printf("}}");
	}
	printf("]}\n");
	free(name);
	return 0;
}

int
main(int argc, char *argv[])
{
	if (argc < 2)
		tw_usage_err("missing command (writev or stdio)");
	if (strcmp(argv[1], "writev") == 0)
		return cmd_writev(argc - 1, argv + 1);
	if (strcmp(argv[1], "stdio") == 0)
		return cmd_stdio(argc - 1, argv + 1);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)
		help();
	tw_usage_err("unknown command %s (writev or stdio)",
	    tw_quote(argv[1]));
}
