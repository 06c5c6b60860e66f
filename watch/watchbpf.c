/*
 * watchbpf	Load tw watch's BPF programs with libbpf and print their maps as NDJSON, in
 *		the shape `bpftrace -f json` prints (so one parser reads both).
 *
 *   watchbpf exec OBJ --own PID --interval S [--keys N] [--keys32 N]
 *	exec.bpf.o, attached until SIGINT or SIGTERM.  Every S seconds: flip the phase, wait
 *	for programs that read the old one, print the old phase's maps (@exec0, @first0,
 *	@last0, @started0 (the name it was last started by) or the same with 1; keys
 *	"dev,inode,generation,bitness", dev as stat(2)'s st_dev; @n0: the phase's execs by
 *	bitness, {"64": n, "32": n}), then each of their files' path resolved in the kernel
 *	(@path0: "dev,inode,generation" -> the absolute path; @why0: the same key -> 0
 *	resolved, 1 deleted, 2 too deep, 3 too long, 4 not walked (the LRU map let it go), 5 no
 *	bpf_loop, 6 anonymous (the path is the kernel's name for it, "/memfd:NAME"), 7 in no
 *	mount namespace), delete them, print "interval done".  At the signal: both phases, then
 *	"end".  Output on standard output.
 *   watchbpf window OBJ --own PID --out FILE [--keys N]
 *	window.bpf.o, attached until SIGINT or SIGTERM, then detached and every map printed
 *	to FILE (@calls, @exec, @exit, @fork, @vsys; @wlat as a histogram and @wsum).
 *
 * Why not bpftrace, which the census uses: any bpftrace 0.17 process keeps about 100 MiB
 * resident (its LLVM and clang), for the watch's whole life.  These programs are compiled
 * once, at build time, and this loader keeps a few MiB.
 *
 * Both exit with PR_SET_PDEATHSIG: an orphaned window would slow every system call on the
 * machine.  Errors are one line on standard error and exit status 1; --help prints this.
 */
#define _GNU_SOURCE
#include <err.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "maps.h"

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;

static const char *USAGE =
	"usage: watchbpf exec OBJ --own PID --interval S [--keys N] [--keys32 N]\n"
	"       watchbpf window OBJ --own PID --out FILE [--keys N]\n"
	"Load tw watch's BPF programs (exec.bpf.o, window.bpf.o) and print their maps as NDJSON.\n"
	"  --own PID      tw's process: its children and theirs are not counted (exec) or are\n"
	"                 marked own (window)\n"
	"  --interval S   exec: print and clear the counts every S seconds (1-86400)\n"
	"  --out FILE     window: where the maps go when SIGINT or SIGTERM ends the window\n"
	"  --keys N       each map's key limit, preallocated (16-1048576; 4096 exec, 8192 window);\n"
	"                 exec: the keys a phase gives 64-bit files\n"
	"  --keys32 N     exec: the keys a phase gives 32-bit files, a budget of their own\n"
	"                 (16-1048576; default a quarter of --keys, at least 16)\n";

static volatile sig_atomic_t stop_sig;
static void on_signal(int s) { stop_sig = s; }

/* libbpf's warnings are kept, not printed (a failed load's is the verifier's whole log):
 * the last line that says what failed goes into the one-line error. TW_BPF_VERBOSE=1 prints
 * them all. */
static char cause[300];

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char line[sizeof(cause)];

	if (getenv("TW_BPF_VERBOSE"))
		return vfprintf(stderr, fmt, ap);
	if (level != LIBBPF_WARN)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = 0;
	if (strstr(line, "failed") && !strstr(line, "failed to load object") &&
	    !strstr(line, "failed to load: "))
		snprintf(cause, sizeof(cause), "%s", line);
	return 0;
}

/* A kernel string as a JSON string: quote, backslash and control bytes escaped as JSON
 * requires; a byte that is not part of valid UTF-8 as the four characters \xNN (Python's
 * backslashreplace), so that every line is valid UTF-8 JSON and the name stays readable, and a
 * backslash as two (twtools.core.escape.name: the text maps back to the name's bytes). */
static void json_str_bytes(FILE *o, const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + strnlen(s, max);

	while (p < end) {
		unsigned c = *p;
		int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 && c >= 0xc2 ? 1 :
			(c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 && c <= 0xf4 ? 3 : -1;
		int ok = n >= 0 && p + n < end;

		for (int i = 1; ok && i <= n; i++)
			ok = (p[i] & 0xc0) == 0x80;
		if (ok && n == 2)	/* no overlong forms, no surrogates */
			ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
		if (ok && n == 3)
			ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
		if (!ok) {
			fprintf(o, "\\\\x%02x", c);
			p++;
		} else if (n > 0) {
			fwrite(p, 1, n + 1, o);
			p += n + 1;
		} else {
			if (c == '\\')	/* doubled, so that \xNN stays apart from a name's own */
				fputs("\\\\\\\\", o);
			else if (c == '"')
				fprintf(o, "\\%c", c);
			else if (c < 0x20 || c == 0x7f)
				fprintf(o, "\\u%04x", c);
			else
				fputc(c, o);
			p++;
		}
	}
}

/* Printing one map as bpftrace -f json does: {"type": "map", "data": {"@name": {"k": v}}}.
 * A key's fields are joined by commas (strings as they came: the reader rejoins them). */
struct printer { FILE *o; int n; };

static void map_open(struct printer *pr, const char *type, const char *name)
{
	fprintf(pr->o, "{\"type\": \"%s\", \"data\": {\"%s\": {", type, name);
	pr->n = 0;
}

static void key_open(struct printer *pr)
{
	fputs(pr->n++ ? ", \"" : "\"", pr->o);
}

static void map_close(struct printer *pr)
{
	fputs("}}}\n", pr->o);
}

static void printf_line(FILE *o, const char *text)
{
	fprintf(o, "{\"type\": \"printf\", \"data\": \"%s\\n\"}\n", text);
	fflush(o);
}

/* Every key of a map, copied out first: deleting while walking would restart the walk. */
static void *keys_of(int fd, size_t ksize, size_t *count)
{
	size_t cap = 256, n = 0;
	char *keys = malloc(cap * ksize), *prev = NULL;

	if (!keys)
		errx(1, "out of memory");
	while (bpf_map_get_next_key(fd, prev, keys + n * ksize) == 0) {
		prev = keys + n * ksize;
		if (++n == cap) {
			char *k = realloc(keys, (cap *= 2) * ksize);
			if (!k)
				errx(1, "out of memory");
			keys = k;
			prev = keys + (n - 1) * ksize;
		}
	}
	*count = n;
	return keys;
}

static int map_fd(struct bpf_object *obj, const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);

	if (!m)
		errx(1, "%s has no map '%s'", bpf_object__name(obj), name);
	return bpf_map__fd(m);
}

static struct bpf_object *open_obj(const char *path, long keys, const char *const *sized, int twice)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);

	if (!obj)
		errx(1, "cannot open %s: %s", path, strerror(errno));
	for (const char *const *n = sized; *n; n++) {
		struct bpf_map *m = bpf_object__find_map_by_name(obj, *n);
		if (!m || bpf_map__set_max_entries(m, keys * (twice ? 2 : 1)))
			errx(1, "%s: cannot size map '%s'", path, *n);
	}
	return obj;
}

static void load(struct bpf_object *obj, const char *path)
{
	int e = bpf_object__load(obj);

	if (e)
		errx(1, "loading %s failed: %s%s%s", path, strerror(-e), cause[0] ? ": " : "",
		    cause[0] ? cause : " (it needs root, BTF at /sys/kernel/btf/vmlinux and tracefs)");
}

static void set_config(struct bpf_object *obj, u32 own, u32 phase, u32 keys, u32 keys32)
{
	u32 zero = 0;
	struct tw_config c = { own, phase, keys, keys32 };

	if (bpf_map_update_elem(map_fd(obj, "config"), &zero, &c, BPF_ANY))
		errx(1, "cannot set the programs' configuration: %s", strerror(errno));
}

static struct bpf_link **attach_all(struct bpf_object *obj, int *count)
{
	struct bpf_program *p;
	struct bpf_link **links = calloc(16, sizeof(*links));
	int n = 0;

	if (!links)
		errx(1, "out of memory");
	bpf_object__for_each_program(p, obj) {
		if (!bpf_program__autoload(p))
			continue;
		if (n == 16)
			errx(1, "too many programs");
		links[n] = bpf_program__attach(p);
		if (!links[n])
			errx(1, "attaching %s failed: %s%s%s", bpf_program__section_name(p), strerror(errno),
			    cause[0] ? ": " : "", cause);
		n++;
	}
	*count = n;
	return links;
}

/* --- exec ----------------------------------------------------------------------------- */

/* The kernel's dev_t (major << 20 | minor) as stat(2)'s st_dev, which /proc's readers see. */
static dev_t user_dev(u32 kdev)
{
	return makedev(kdev >> 20, kdev & ((1U << 20) - 1));
}

static int same_file(const struct exec_key *a, const struct exec_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->gen == b->gen;
}

/* A file's key as printed: "dev,inode,generation" (and ",bitness" for the counts). */
static void file_key(FILE *o, const struct exec_key *k)
{
	fprintf(o, "%llu,%llu,%llu", (unsigned long long)user_dev(k->dev),
		(unsigned long long)k->ino, (unsigned long long)k->gen);
}

/* @path<ph> and @why<ph>: each file of the phase's keys once, its path as the kernel resolved
 * it (the LRU map keeps it while the file runs; a file it let go is said, why 4). */
static void print_paths(struct bpf_object *obj, u32 ph, const struct exec_key *keys,
			const char *mine, size_t count, FILE *o)
{
	int fd = map_fd(obj, "paths");
	static struct path_val pv;
	struct printer pr = { o, 0 };
	char name[16];
	u32 *why = calloc(count ? count : 1, sizeof(*why));
	char *first = calloc(count ? count : 1, 1);

	if (!why || !first)
		errx(1, "out of memory");
	for (size_t i = 0; i < count; i++) {
		size_t j;

		if (!mine[i])
			continue;
		for (j = 0; j < i; j++)		/* a file run as 32- and 64-bit code: printed once */
			if (first[j] && same_file(&keys[j], &keys[i]))
				break;
		first[i] = j == i;
	}
	snprintf(name, sizeof(name), "@path%u", ph);
	map_open(&pr, "map", name);
	for (size_t i = 0; i < count; i++) {
		struct file_id id = { keys[i].dev, 0, keys[i].ino, keys[i].gen };

		if (!first[i])
			continue;
		if (bpf_map_lookup_elem(fd, &id, &pv) || pv.off >= TW_PATHLEN) {
			why[i] = PATH_NO_FILE;
			continue;
		}
		why[i] = pv.why;
		key_open(&pr);
		file_key(o, &keys[i]);
		fputs("\": \"", o);
		json_str_bytes(o, pv.buf + pv.off, TW_PATHLEN - pv.off);
		fputc('"', o);
	}
	map_close(&pr);
	snprintf(name, sizeof(name), "@why%u", ph);
	map_open(&pr, "map", name);
	for (size_t i = 0; i < count; i++) {
		if (!first[i])
			continue;
		key_open(&pr);
		file_key(o, &keys[i]);
		fprintf(o, "\": %u", why[i]);
	}
	map_close(&pr);
	free(why);
	free(first);
}

static void print_exec_phase(struct bpf_object *obj, u32 ph, FILE *o)
{
	int fd = map_fd(obj, "execs"), nfd = map_fd(obj, "n"), kfd = map_fd(obj, "keys");
	size_t count, i;
	struct exec_key *keys = keys_of(fd, sizeof(*keys), &count);
	struct exec_val *vals = calloc(count ? count : 1, sizeof(*vals));
	char *mine = calloc(count ? count : 1, 1);
	static const char *names[4] = { "@exec", "@first", "@last", "@started" };
	struct printer pr = { o, 0 };
	u64 n[2] = { 0, 0 }, zero = 0;

	if (!vals || !mine)
		errx(1, "out of memory");
	for (i = 0; i < count; i++)
		mine[i] = keys[i].phase == ph && bpf_map_lookup_elem(fd, &keys[i], &vals[i]) == 0;
	for (int f = 0; f < 4; f++) {
		char name[16];

		snprintf(name, sizeof(name), "%s%u", names[f], ph);
		map_open(&pr, "map", name);
		for (i = 0; i < count; i++) {
			if (!mine[i])
				continue;
			key_open(&pr);
			file_key(o, &keys[i]);
			fprintf(o, ",%u\": ", keys[i].is32 ? 1 : 0);
			if (f == 3) {
				fputc('"', o);
				json_str_bytes(o, vals[i].started, sizeof(vals[i].started));
				fputc('"', o);
			} else {
				fprintf(o, "%llu", f == 0 ? vals[i].n : f == 1 ? vals[i].first_ns :
					vals[i].last_ns);
			}
		}
		map_close(&pr);
	}
	print_paths(obj, ph, keys, mine, count, o);
	for (i = 0; i < count; i++)
		if (mine[i])
			bpf_map_delete_elem(fd, &keys[i]);
	/* The keyless counts by bitness: read and zeroed (an exec between the two is the grace's
	 * to wait out); the phase's keys taken, zeroed now that they are deleted. */
	for (u32 b = 0; b < 2; b++) {
		u32 slot = ph * 2 + b;

		bpf_map_lookup_elem(nfd, &slot, &n[b]);
		bpf_map_update_elem(nfd, &slot, &zero, BPF_ANY);
		bpf_map_update_elem(kfd, &slot, &zero, BPF_ANY);
	}
	fprintf(o, "{\"type\": \"map\", \"data\": {\"@n%u\": {\"64\": %llu, \"32\": %llu}}}\n", ph,
		n[0], n[1]);
	free(keys);
	free(vals);
	free(mine);
}

/* How long a program that read the old phase may still be running: a tracepoint program runs
 * with preemption off for microseconds, but a guest's vCPU can be descheduled by its host. */
#define GRACE_NS 50000000L

static void sleep_ns(long ns)
{
	struct timespec t = { ns / 1000000000L, ns % 1000000000L };

	while (nanosleep(&t, &t) && errno == EINTR && !stop_sig)
		;
}

static int run_exec(const char *path, u32 own, long interval, long keys, long keys32)
{
	static const char *const sized[] = { NULL };
	struct bpf_object *obj = open_obj(path, keys, sized, 1);
	struct bpf_map *em = bpf_object__find_map_by_name(obj, "execs");
	struct bpf_map *pm = bpf_object__find_map_by_name(obj, "paths");
	long both = keys + keys32;

	/* Both phases' keys of both budgets. */
	if (!em || bpf_map__set_max_entries(em, 2 * both))
		errx(1, "%s: cannot size map 'execs'", path);
	/* One path a file, as many as both phases' keys and at least 4096 (an LRU: a file not
	 * run lately goes; a small --keys still keeps the paths of a busy machine's interval). */
	if (!pm || bpf_map__set_max_entries(pm, 2 * both > 4096 ? 2 * both : 4096))
		errx(1, "%s: cannot size map 'paths'", path);
	int nlinks;
	u32 phase = 0;

	load(obj, path);
	set_config(obj, own, phase, keys, keys32);
	struct bpf_link **links = attach_all(obj, &nlinks);
	printf_line(stdout, "Counting every exec.");

	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!stop_sig) {
		next.tv_sec += interval;
		while (!stop_sig && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		if (stop_sig)
			break;
		u32 old = phase;
		phase ^= 1;
		set_config(obj, own, phase, keys, keys32);
		sleep_ns(GRACE_NS);
		print_exec_phase(obj, old, stdout);
		printf_line(stdout, "interval done");
	}
	for (int i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	print_exec_phase(obj, 0, stdout);
	print_exec_phase(obj, 1, stdout);
	printf_line(stdout, "end");
	bpf_object__close(obj);
	free(links);
	return 0;
}

/* --- window --------------------------------------------------------------------------- */

static const char *ORIGIN[] = { [ORIGIN_VDSO] = "vdso", [ORIGIN_TEXT] = "text", [ORIGIN_OTHER] = "other" };
static const char *INSN[] = { [INSN_INT80] = "int80", [INSN_SYSCALL] = "syscall",
	[INSN_SYSENTER] = "sysenter", [INSN_UNKNOWN] = "unknown", [INSN_VDSO] = "vdso" };

/* A value's name, or "?" for one the table does not name. */
#define NAME(table, i) ((i) < sizeof(table) / sizeof(*(table)) && (table)[i] ? (table)[i] : "?")

static void print_counts(struct bpf_object *obj, const char *map, const char *name, size_t ksize,
			 void (*key)(FILE *, const void *), FILE *o)
{
	int fd = map_fd(obj, map);
	size_t count;
	char *keys = keys_of(fd, ksize, &count);
	struct printer pr = { o, 0 };

	map_open(&pr, "map", name);
	for (size_t i = 0; i < count; i++) {
		u64 v;

		if (bpf_map_lookup_elem(fd, keys + i * ksize, &v))
			continue;
		key_open(&pr);
		key(o, keys + i * ksize);
		fprintf(o, "\": %llu", v);
	}
	map_close(&pr);
	free(keys);
}

static void image(FILE *o, const struct image *im)
{
	fprintf(o, "%u,%llu,%u", im->pid, im->start, im->gen);
}

static void call_key(FILE *o, const void *p)
{
	const struct call_key *k = p;

	image(o, &k->im);
	fputc(',', o);
	json_str_bytes(o, k->comm, sizeof(k->comm));
	fprintf(o, ",%u,%u,%s,%s,%u", k->compat, k->cs, NAME(ORIGIN, k->origin), NAME(INSN, k->insn),
		k->own);
}

static void exec_key(FILE *o, const void *p)
{
	const struct wexec_key *k = p;

	image(o, &k->im);
	fputc(',', o);
	json_str_bytes(o, k->file, sizeof(k->file));
}

static void exit_key(FILE *o, const void *p)
{
	const struct exit_key *k = p;

	fprintf(o, "%u,%llu", k->pid, k->start);
}

static void fork_key(FILE *o, const void *p)
{
	const struct fork_key *k = p;

	fprintf(o, "%u,%u,%llu,%u", k->child, k->parent, k->start, k->gen);
}

static void vsys_key(FILE *o, const void *p)
{
	const struct vsys_key *k = p;

	image(o, &k->im);
	fputc(',', o);
	json_str_bytes(o, k->comm, sizeof(k->comm));
}

static void wlat_key(FILE *o, const struct wlat_key *k)
{
	image(o, &k->im);
	fprintf(o, ",%u,%llu,%u,%u", k->ifmt, k->magic, k->major, k->sync);
}

static void print_wlat(struct bpf_object *obj, FILE *o)
{
	int fd = map_fd(obj, "wlat");
	size_t count;
	struct wlat_key *keys = keys_of(fd, sizeof(*keys), &count);
	struct wlat_val *vals = calloc(count ? count : 1, sizeof(*vals));
	char *ok = calloc(count ? count : 1, 1);
	struct printer pr = { o, 0 };

	if (!vals || !ok)
		errx(1, "out of memory");
	for (size_t i = 0; i < count; i++)
		ok[i] = bpf_map_lookup_elem(fd, &keys[i], &vals[i]) == 0;
	/* bpftrace's hist buckets: 0 on its own, then [2^(k-1), 2^k) as min and max. */
	map_open(&pr, "hist", "@wlat");
	for (size_t i = 0; i < count; i++) {
		int first = 1;

		if (!ok[i])
			continue;
		key_open(&pr);
		wlat_key(o, &keys[i]);
		fputs("\": [", o);
		for (int s = 0; s < TW_HIST_SLOTS; s++) {
			if (!vals[i].slot[s])
				continue;
			u64 lo = s ? 1ULL << (s - 1) : 0, hi = s ? (1ULL << (s - 1)) * 2 - 1 : 0;
			fprintf(o, "%s{\"min\": %llu, \"max\": %llu, \"count\": %llu}", first ? "" : ", ",
				lo, hi, vals[i].slot[s]);
			first = 0;
		}
		fputc(']', o);
	}
	map_close(&pr);
	map_open(&pr, "map", "@wsum");
	for (size_t i = 0; i < count; i++) {
		if (!ok[i])
			continue;
		key_open(&pr);
		wlat_key(o, &keys[i]);
		fprintf(o, "\": %llu", vals[i].sum_ns);
	}
	map_close(&pr);
	free(keys);
	free(vals);
	free(ok);
}

static int tracepoint_exists(const char *event)
{
	char p[256];

	snprintf(p, sizeof(p), "/sys/kernel/tracing/events/%s", event);
	if (access(p, F_OK) == 0)
		return 1;
	snprintf(p, sizeof(p), "/sys/kernel/debug/tracing/events/%s", event);
	return access(p, F_OK) == 0;
}

static int run_window(const char *path, u32 own, const char *out, long keys)
{
	static const char *const sized[] = { "calls", "execs", "exits", "forks", "vsys", "wlat",
					     "gen", "own", "wstarts", NULL };
	struct bpf_object *obj = open_obj(path, keys, sized, 0);
	struct bpf_program *fault = bpf_object__find_program_by_name(obj, "on_fault");
	FILE *o = fopen(out, "w");
	int nlinks;

	if (!o)
		errx(1, "cannot write %s: %s", out, strerror(errno));
	/* A kernel without exceptions:page_fault_user: the window runs blind to the vsyscall
	 * page (tw watch says so), rather than not at all. */
	if (fault && !tracepoint_exists("exceptions/page_fault_user"))
		bpf_program__set_autoload(fault, false);
	load(obj, path);
	set_config(obj, own, 0, keys, 0);
	u32 me = getpid();
	u8 yes = 1;
	bpf_map_update_elem(map_fd(obj, "own"), &me, &yes, BPF_ANY);	/* this loader */
	struct bpf_link **links = attach_all(obj, &nlinks);
	printf_line(o, "Tracing system calls of every process for one window.");

	while (!stop_sig)
		pause();
	for (int i = 0; i < nlinks; i++)
		bpf_link__destroy(links[i]);
	print_counts(obj, "calls", "@calls", sizeof(struct call_key), call_key, o);
	print_counts(obj, "execs", "@exec", sizeof(struct wexec_key), exec_key, o);
	print_counts(obj, "exits", "@exit", sizeof(struct exit_key), exit_key, o);
	print_counts(obj, "forks", "@fork", sizeof(struct fork_key), fork_key, o);
	print_counts(obj, "vsys", "@vsys", sizeof(struct vsys_key), vsys_key, o);
	print_wlat(obj, o);
	if (fclose(o))
		errx(1, "writing %s: %s", out, strerror(errno));
	bpf_object__close(obj);
	free(links);
	return 0;
}

/* --- arguments ------------------------------------------------------------------------ */

static long number(const char *opt, const char *v, long lo, long hi)
{
	char *end;
	long n;

	errno = 0;
	n = v ? strtol(v, &end, 10) : 0;
	if (!v || errno || end == v || *end || n < lo || n > hi)
		errx(1, "%s wants a whole number from %ld to %ld, not '%s'", opt, lo, hi, v ? v : "");
	return n;
}

int main(int argc, char **argv)
{
	long own = -1, interval = 0, keys = 0, keys32 = 0;
	const char *out = NULL;

	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(USAGE, stdout);
		return 0;
	}
	if (argc < 3 || (strcmp(argv[1], "exec") && strcmp(argv[1], "window"))) {
		fputs(USAGE, stderr);
		return 2;
	}
	int window = !strcmp(argv[1], "window");
	for (int i = 3; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--own"))
			own = number("--own", v, 0, 1L << 22);
		else if (!strcmp(argv[i], "--interval") && !window)
			interval = number("--interval", v, 1, 86400);
		else if (!strcmp(argv[i], "--keys"))
			keys = number("--keys", v, 16, 1 << 20);
		else if (!strcmp(argv[i], "--keys32") && !window)
			keys32 = number("--keys32", v, 16, 1 << 20);
		else if (!strcmp(argv[i], "--out") && window)
			out = v;
		else
			errx(1, "unknown option '%s' for %s (--help)", argv[i], argv[1]);
		i++;
	}
	if (own < 0)
		errx(1, "--own PID is required");
	if (!window && !interval)
		errx(1, "--interval S is required");
	if (window && !out)
		errx(1, "--out FILE is required");

	/* Die with the parent, however it ends (SIGKILL included); and if it is gone already. */
	pid_t parent = getppid();
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent)
		errx(1, "the parent is gone");
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	libbpf_set_print(libbpf_print);

	if (window)
		return run_window(argv[2], own, out, keys ? keys : 8192);
	keys = keys ? keys : 4096;
	return run_exec(argv[2], own, interval, keys, keys32 ? keys32 : keys / 4 > 16 ? keys / 4 : 16);
}
