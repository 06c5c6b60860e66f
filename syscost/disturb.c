/*
 * disturb.c: the disturbance counters read around every batch (disturb.h).
 */
#include <sys/resource.h>
#include <sys/types.h>

#include <ctype.h>
#include <err.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "disturb.h"

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

void
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

void
disturb_open(long cpu, int *have_steal, int *have_irqs)
{
	proc_open(&proc_stat);
	proc_open(&proc_irq);
	*have_steal = read_steal(cpu) >= 0;
	*have_irqs = read_irqs(cpu) >= 0;
}
