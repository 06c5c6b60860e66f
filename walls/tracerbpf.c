/*
 * tracerbpf.c	Loads walls/tracer.bpf.o and attaches or detaches it on command, so that
 *		`tw ab --wall tracer:raw_syscalls` can put the tracer up for B's runs and take it
 *		down for A's, round by round, without loading it again.
 *
 * usage: tracerbpf [--attach tracepoint|raw_tp|tp_btf] OBJ
 *	--attach: how its programs go on raw_syscalls: the tracepoint pair through perf events
 *	(the default, as bpftrace attaches), or one sys_enter counter as a raw tracepoint's or
 *	a BTF tracepoint's BPF link (as libbpf agents attach), loaded alone.
 *	Reads commands on stdin, one a line, and answers each on stdout when it is done:
 *	  attach   attach both programs            -> "attached"
 *	  detach   detach them                     -> "detached"
 *	  count    the calls counted so far        -> "count N"
 *	At end of input: detached, then one JSON line {"calls": N, "hist": [...]}; exit 0.
 *	Any failure: one line on stderr, exit 1.  Needs root (or CAP_BPF and CAP_PERFMON) and
 *	BTF at /sys/kernel/btf/vmlinux.
 */
#include <bpf/libbpf.h>
#include <bpf/bpf.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tracer.h"

static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("tracerbpf: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level; (void)fmt; (void)ap;
	return 0;
}

/* The sum over CPUs of one per-CPU array's slots [0, n). */
static void sums(struct bpf_object *obj, const char *name, unsigned long long *out, unsigned n)
{
	int ncpu = libbpf_num_possible_cpus(), fd;
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);
	unsigned long long *v;

	if (!m || ncpu <= 0 || (v = calloc((size_t)ncpu, sizeof(*v))) == NULL)
		die("cannot read map %s", name);
	fd = bpf_map__fd(m);
	for (unsigned k = 0; k < n; k++) {
		out[k] = 0;
		if (bpf_map_lookup_elem(fd, &k, v))
			die("reading map %s: %s", name, strerror(errno));
		for (int c = 0; c < ncpu; c++)
			out[k] += v[c];
	}
	free(v);
}

static unsigned long long total(struct bpf_object *obj)
{
	static unsigned long long c[TRACER_NRS];
	unsigned long long t = 0;

	sums(obj, "calls", c, TRACER_NRS);
	for (unsigned k = 0; k < TRACER_NRS; k++)
		t += c[k];
	return t;
}

/* Which programs --attach loads: those whose section starts with this prefix. */
static const char *const kinds[][2] = {
	{ "tracepoint", "tracepoint/" }, { "raw_tp", "raw_tp/" }, { "tp_btf", "tp_btf/" },
};

int main(int argc, char **argv)
{
	struct bpf_link *links[2] = { NULL, NULL };
	struct bpf_object *obj;
	struct bpf_program *p;
	char line[64];
	unsigned long long h[TRACER_SLOTS];
	const char *prefix = "tracepoint/";

	if (argc == 4 && !strcmp(argv[1], "--attach")) {
		prefix = NULL;
		for (unsigned i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
			if (!strcmp(argv[2], kinds[i][0]))
				prefix = kinds[i][1];
		if (!prefix) {
			fprintf(stderr, "tracerbpf: --attach %.40s: one of tracepoint, raw_tp, "
			    "tp_btf\n", argv[2]);
			return 2;
		}
		argv += 2;
		argc -= 2;
	}
	if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs("usage: tracerbpf [--attach tracepoint|raw_tp|tp_btf] OBJ  (commands on "
		      "stdin: attach, detach, count)\n", argc == 2 ? stdout : stderr);
		return argc == 2 ? 0 : 2;
	}
	libbpf_set_print(quiet);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj)
		die("cannot open %s: %s", argv[1], strerror(errno));
	bpf_object__for_each_program(p, obj)
		bpf_program__set_autoload(p, !strncmp(bpf_program__section_name(p), prefix,
		    strlen(prefix)));
	if (bpf_object__load(obj))
		die("loading %s failed: %s (it needs root, BTF and tracefs)", argv[1], strerror(errno));
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "attach")) {
			int n = 0;

			if (links[0])
				die("attach: already attached");
			bpf_object__for_each_program(p, obj) {
				if (!bpf_program__autoload(p))
					continue;
				if (n == 2 || !(links[n] = bpf_program__attach(p)))
					die("attaching %s failed: %s", bpf_program__section_name(p),
					    strerror(errno));
				n++;
			}
			puts("attached");
		} else if (!strcmp(line, "detach")) {
			for (int i = 0; i < 2; i++) {
				bpf_link__destroy(links[i]);
				links[i] = NULL;
			}
			puts("detached");
		} else if (!strcmp(line, "count")) {
			printf("count %llu\n", total(obj));
		} else {
			die("unknown command '%.40s' (attach, detach, count)", line);
		}
	}
	for (int i = 0; i < 2; i++)
		bpf_link__destroy(links[i]);
	sums(obj, "hist", h, TRACER_SLOTS);
	printf("{\"calls\":%llu,\"hist\":[", total(obj));
	for (int k = 0; k < TRACER_SLOTS; k++)
		printf("%s%llu", k ? "," : "", h[k]);
	puts("]}");
	bpf_object__close(obj);
	return 0;
}
