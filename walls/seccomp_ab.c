/*
 * seccomp_ab.c	An independent check of `tw ab --wall seccomp:args`: the same rules as
 *		walls/profiles/args.json, written here with libseccomp's own C API, and what
 *		they add to getppid, timed the plainest way: bare and filtered processes
 *		alternating, each the fastest of 40 batches of 100 000 calls.  Shares no code
 *		with tw or syscost.  `make bench-walls` runs it beside tw ab and prints both.
 *
 * usage: seccomp_ab [PAIRS]	(default 9)
 * Prints one JSON line: per way in (glibc's getppid wrapper, the 64-bit syscall instruction
 * inline, int 0x80 from 64-bit code inline), each pair's bare and filtered ns per call, and
 * the median of the pairs' differences, and the difference of the two floors (the fastest
 * filtered process less the fastest bare one: on a noisy host a process may never meet the
 * machine's fast state, and a pair with one such process moves the median; the floors are
 * what each side costs when the host lets it, as tw ab's undisturbed figure is).  The wrapper is how real programs make the call: a
 * function that makes the call and returns with `ret`, which is what tw ab's leading row
 * (64-libc, ret) measures; the inline ways are tw ab's inline shape.
 *
 * The rules (kept equal to args.json by tests/test_walls_bench.py): every call allowed but
 * 60 denied by name with EPERM; write refused (EBADF) when its descriptor is 2^20 or more,
 * getppid (EINVAL) when its unused first argument is 2^64 - 16.  Architectures x86-64, x86
 * and x32, as the profile lists them.
 */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <sys/wait.h>

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BATCHES	40
#define CALLS	100000

static const char *const denied[] = {
	"acct", "add_key", "bpf", "clock_settime", "delete_module", "finit_module", "fsconfig",
	"fsmount", "fsopen", "fspick", "get_kernel_syms", "get_mempolicy", "init_module",
	"ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie",
	"mbind", "mount", "mount_setattr", "move_mount", "move_pages", "name_to_handle_at",
	"nfsservctl", "open_by_handle_at", "open_tree", "perf_event_open", "pidfd_getfd",
	"pivot_root", "process_vm_readv", "process_vm_writev", "ptrace", "query_module",
	"quotactl", "quotactl_fd", "reboot", "request_key", "set_mempolicy", "setdomainname",
	"sethostname", "settimeofday", "setns", "stime", "swapoff", "swapon", "sysfs", "_sysctl",
	"syslog", "umount", "umount2", "unshare", "uselib", "userfaultfd", "ustat", "vhangup",
	"vm86", "vm86old",
};

static void
load_filter(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	size_t i;
	int rc = 0;

	if (ctx == NULL)
		exit(3);
	rc |= seccomp_arch_add(ctx, SCMP_ARCH_X86);
	rc |= seccomp_arch_add(ctx, SCMP_ARCH_X32);
	for (i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		int nr = seccomp_syscall_resolve_name(denied[i]);

		if (nr != __NR_SCMP_ERROR)
			rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
	}
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EBADF), SCMP_SYS(write), 1,
	    SCMP_A0(SCMP_CMP_GE, 1048576));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(getppid), 1,
	    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)-16));
	if (rc != 0 || seccomp_load(ctx) != 0)
		exit(4);
	seccomp_release(ctx);
}

static double
now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* getppid through glibc's wrapper (a call into libc, `syscall`, `ret`), by the 64-bit
 * syscall instruction inline, or by int 0x80 inline (i386's number 64). */
static long
call_libc(void)
{
	return getppid();
}

static inline long
call64(void)
{
	long r;

	__asm__ volatile ("syscall" : "=a"(r) : "a"(110L), "D"(0L) : "rcx", "r11", "memory");
	return r;
}

static inline long
call80(void)
{
	long r;

	__asm__ volatile ("int $0x80" : "=a"(r) : "a"(64L), "b"(0L) : "memory");
	return r;
}

/* The fastest of BATCHES batches of `calls` calls, ns per call, in a child that is
 * filtered or not; written to fd. */
static void
child(int filtered, int way, int fd)
{
	double best = 1e18;
	long want = getppid();

	if (filtered)
		load_filter();
	for (int b = 0; b < BATCHES; b++) {
		int calls = way == 2 ? CALLS / 20 : CALLS;	/* int 0x80 costs far more a call */
		double t0 = now_ns();

		for (int i = 0; i < calls; i++)
			if ((way == 2 ? call80() : way == 1 ? call64() : call_libc()) != want)
				_exit(5);
		double d = (now_ns() - t0) / calls;

		if (d < best)
			best = d;
	}
	if (write(fd, &best, sizeof(best)) != sizeof(best))
		_exit(6);
	_exit(0);
}

static double
run(int filtered, int way)
{
	int p[2], st;
	double v = -1;
	pid_t pid;

	if (pipe(p) != 0 || (pid = fork()) < 0)
		exit(7);
	if (pid == 0)
		child(filtered, way, p[1]);
	close(p[1]);
	if (read(p[0], &v, sizeof(v)) != sizeof(v))
		v = -1;
	close(p[0]);
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || v < 0) {
		fprintf(stderr, "seccomp_ab: a %s child failed (status %d)\n",
		    filtered ? "filtered" : "bare", st);
		exit(1);
	}
	return v;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	int pairs = argc > 1 ? atoi(argv[1]) : 9;
	static const char *const names[] = { "64-libc", "64-syscall", "64-int80" };
	cpu_set_t set;

	if (pairs < 1 || pairs > 100) {
		fprintf(stderr, "usage: seccomp_ab [PAIRS, 1 to 100]\n");
		return 2;
	}
	CPU_ZERO(&set);
	CPU_SET(sysconf(_SC_NPROCESSORS_ONLN) - 1, &set);
	sched_setaffinity(0, sizeof(set), &set);
	printf("{\"batches\":%d,\"calls\":%d,\"pairs\":%d", BATCHES, CALLS, pairs);
	for (int way = 0; way < 3; way++) {
		double bare[100], filt[100], diff[100];

		printf(",\"%s\":{\"bare_ns\":[", names[way]);
		for (int i = 0; i < pairs; i++) {
			/* the order turns pair by pair, so a drift lands on both alike */
			if (i % 2 == 0) {
				bare[i] = run(0, way);
				filt[i] = run(1, way);
			} else {
				filt[i] = run(1, way);
				bare[i] = run(0, way);
			}
			diff[i] = filt[i] - bare[i];
			printf("%s%.1f", i ? "," : "", bare[i]);
		}
		printf("],\"filtered_ns\":[");
		for (int i = 0; i < pairs; i++)
			printf("%s%.1f", i ? "," : "", filt[i]);
		qsort(diff, (size_t)pairs, sizeof(double), cmp);
		printf("],\"added_ns_median\":%.1f", pairs % 2 ? diff[pairs / 2] :
		    (diff[pairs / 2 - 1] + diff[pairs / 2]) / 2);
		qsort(bare, (size_t)pairs, sizeof(double), cmp);
		qsort(filt, (size_t)pairs, sizeof(double), cmp);
		printf(",\"added_ns_floor\":%.1f}", filt[0] - bare[0]);
	}
	printf("}\n");
	return 0;
}
