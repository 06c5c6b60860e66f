/*
 * neighbour: a noisy neighbour on purpose, to reproduce a noisy cloud host on any machine.
 *
 *   neighbour [--cpu n] [--share s] [--burst-ms b] [--mb m] [--seconds t]
 *             [--seed x] [--kind cache|shootdown|both] [--victim n]
 *	Pinned to CPU n (default: the first CPU this process may use; syscost
 *	pins to the last), alternates noisy bursts and quiet stretches.  In a
 *	noisy burst it thrashes the caches and memory: one byte written every
 *	64 bytes over an m MiB buffer (default 64), and a pointer chase over
 *	the same buffer's cache lines in a random cycle, so that both the shared
 *	cache and the memory bandwidth are taken from the other CPU.  In a quiet
 *	stretch it sleeps.  Burst and quiet lengths are exponential, the bursts'
 *	mean b ms (default 3000), the quiet stretches' mean b (1 - s) / s, so
 *	that a share s of the time (default 0.9) is noisy; s = 1 is always
 *	noisy, s = 0 always quiet.
 *
 * Why it exists: issue 42's noisy AMD guest was slowed by other tenants most
 * of the time, and quiet in bursts of a few seconds.  That host cannot be
 * had on demand; this program makes one inside any guest with two CPUs
 * (docs/syscost.md, "A noisy neighbour on purpose"): `tw neighbour` in one
 * terminal, `tw bench` in another.  syscost runs SCHED_FIFO on its own CPU,
 * so the neighbour never shares that CPU's time; it shares what the two
 * CPUs share: the last-level cache, the memory bus and, on an SMT pair, the
 * core.
 *
 * --kind shootdown adds interrupts the victim did not ask for, the other way
 * a busy host slows a guest: a thread of this process naps on the victim CPU
 * (--victim, default the last allowed one, where syscost runs) so that this
 * address space stays live there, and the main thread maps, touches and
 * unmaps pages in a loop, each unmap a TLB shootdown that may interrupt the
 * victim (in a guest, a VM exit or two).  How much either kind slows the
 * victim depends on the host: what the two vCPUs share, and how the
 * hypervisor delivers the interrupts.  Measure it with tw bench beside
 * `tw neighbour` rather than assume it (docs/syscost.md has what it did on
 * the machines tried).  --kind both does both; cache is the default.
 *
 * It stops after t seconds (default: never), on SIGTERM or SIGINT, and
 * when its parent dies (PR_SET_PDEATHSIG), and prints one JSON object on
 * stdout: the seconds it ran, the noisy share it achieved and the one its drawn stretches
 * planned (which late wake-ups on a loaded machine do not move), the bursts.
 * Exit 2 on bad usage, 1 on a run-time error.  Numbers on the command line
 * are read by tw_cli.c.
 */
#include <err.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "tw_cli.h"

#define LINE		64
#define MAX_MB		65536
#define MAX_BURST_MS	3600000.0
#define MAX_SECONDS	31536000.0
/* Work between two looks at the clock: short against a burst of a few
 * milliseconds, long against the clock read. */
#define CHUNK_LINES	4096
#define CHASE_STEPS	1024

const char tw_usage[] =
    "usage: neighbour [--cpu n] [--share s] [--burst-ms b] [--mb m]\n"
    "                 [--seconds t] [--seed x] [--kind cache|shootdown|both]\n"
    "                 [--victim n]\n"
    "       neighbour -h";

enum { KIND_CACHE = 1, KIND_SHOOTDOWN = 2, KIND_BOTH = 3 };

static volatile sig_atomic_t stop_signal;
/* Set while a shootdown burst runs: the napping thread stays on the victim CPU. */
static volatile int shooting;
static long victim_cpu = -1;

/* The thread that keeps this address space live on the victim CPU: it naps
 * there a millisecond at a time, so the kernel counts the CPU among those
 * that may hold its TLB entries and every unmap interrupts it. */
static void *
napper(void *arg)
{
	struct timespec ms = { 0, 1000000 }, idle = { 0, 50000000 };

	(void)arg;
	pin_cpu(victim_cpu);
	/* Between bursts it naps long: its own wake-ups are interrupts too. */
	while (!stop_signal)
		nanosleep(shooting ? &ms : &idle, NULL);
	return NULL;
}

static void
on_signal(int sig)
{
	stop_signal = sig;
}

static void
help(void)
{
	printf("%s\n\n", tw_usage);
	printf(
"Make a noisy neighbour: on one CPU, bursts that thrash the caches and\n"
"memory, and quiet stretches that sleep, of exponential lengths.  At exit,\n"
"one JSON object: the seconds run, the noisy share achieved, the bursts.\n"
"\n"
"  --cpu N          the CPU to run on (default: the first this process may\n"
"                   use; syscost pins to the last)\n"
"  --share S        the noisy share of the time, 0 to 1 (default 0.9)\n"
"  --burst-ms B     the noisy bursts' mean length in ms (default 3000)\n"
"  --mb M           the buffer thrashed, in MiB (default 64)\n"
"  --seconds T      stop after T seconds (default: on SIGTERM or SIGINT, or\n"
"                   when the parent process dies)\n"
"  --seed X         the seed of the burst lengths (default: from the time)\n"
"  --kind K         cache (thrash the caches and memory), shootdown (send the\n"
"                   victim CPU TLB-shootdown interrupts) or both (default\n"
"                   cache)\n"
"  --victim N       the CPU the shootdowns hit (default: the last this\n"
"                   process may use, where syscost runs)\n"
"  -h, --help       print this help and exit\n");
	exit(0);
}

static double
now_s(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) == -1)
		err(1, "clock_gettime(CLOCK_MONOTONIC)");
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64: small, seedable, good enough for burst lengths. */
static uint64_t rng_state;

static uint64_t
rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1]. */
static double
rng_unit(void)
{
	return ((double)(rng_next() >> 11) + 1.0) / 9007199254740992.0;
}

static double
exponential(double mean)
{
	return -mean * log(rng_unit());
}

/*
 * The buffer: n cache lines, each line's first word the index of the next
 * line in one random cycle over all of them (Sattolo's shuffle), so that the
 * chase visits every line in an order the prefetchers cannot follow.  The
 * stride writes touch byte 8 of each line and leave the cycle alone.
 */
static unsigned char *
make_buffer(size_t lines)
{
	unsigned char *buf;
	size_t i, j, tmp;

	buf = mmap(NULL, lines * LINE, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		err(1, "mmap(%zu MiB)", lines * LINE >> 20);
	for (i = 0; i < lines; i++)
		*(size_t *)(buf + i * LINE) = i;
	for (i = lines - 1; i > 0; i--) {
		j = (size_t)(rng_next() % i);
		tmp = *(size_t *)(buf + i * LINE);
		*(size_t *)(buf + i * LINE) = *(size_t *)(buf + j * LINE);
		*(size_t *)(buf + j * LINE) = tmp;
	}
	return buf;
}

/* Map, touch and unmap one page: the unmap must flush the page from every
 * CPU where this address space may be cached, the victim's included. */
static void
shootdown(void)
{
	int i;

	for (i = 0; i < 16; i++) {
		volatile char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			err(1, "mmap");
		p[0] = 1;
		if (munmap((void *)p, 4096) == -1)
			err(1, "munmap");
	}
}

/* Sleep until `until` (seconds on CLOCK_MONOTONIC; infinity for ever) or a signal.  At most
 * an hour a call, so that no time_t ever holds an infinity. */
static void
sleep_until(double until)
{
	struct timespec ts;
	double t, target;
	int e;

	while (!stop_signal) {
		t = now_s();
		if (t >= until)
			return;
		target = fmin(until, t + 3600);
		ts.tv_sec = (time_t)target;
		ts.tv_nsec = (long)((target - (double)ts.tv_sec) * 1e9);
		if (ts.tv_nsec > 999999999L)
			ts.tv_nsec = 999999999L;
		e = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		if (e != 0 && e != EINTR) {
			errno = e;
			err(1, "clock_nanosleep");
		}
	}
}

/* --seed: the burst lengths' seed, given so that a run can be repeated. */
struct seed {
	uint64_t value;
	int given;
};

static void
take_seed(const char *opt, const char *arg, void *to)
{
	struct seed *seed = to;

	seed->value = (uint64_t)tw_int_arg(opt, arg, 0, INT64_MAX);
	seed->given = 1;
}

/* --kind: what a burst does, KIND_CACHE, KIND_SHOOTDOWN or both (1-3). */
static const char *const kind_words[] = { "cache", "shootdown", "both" };

static void
take_kind(const char *opt, const char *arg, void *to)
{
	int i;

	(void)opt;	/* its message is its own: "--kind must be ..." */
	for (i = 0; i < 3 && strcmp(arg, kind_words[i]) != 0; i++)
		;
	if (i == 3)
		tw_usage_err("--kind must be cache, shootdown or both, not %s",
		    tw_quote(arg));
	*(int *)to = i + 1;
}

int
main(int argc, char *argv[])
{
	long cpu = -1, mb = 64;
	double share = 0.9, burst_ms = 3000, seconds = 0, t0, t, deadline, end,
	    noisy_s = 0, quiet_mean, planned_noisy_s = 0, planned_s = 0;
	struct seed seed = { 0, 0 };
	int noisy, kind = KIND_CACHE;
	const char *kind_name;
	pthread_t nap;
	long bursts = 0;
	size_t lines, pos = 0, at = 0, i, k;
	unsigned char *buf;
	pid_t parent;
	struct sigaction sa;
	const char *why;
	const struct tw_opt opts[] = {
		TW_LONG("cpu", &cpu, 0, 1023),
		TW_REAL("share", &share, 0, 1),
		TW_REAL("burst-ms", &burst_ms, 1, MAX_BURST_MS),
		TW_LONG("mb", &mb, 1, MAX_MB),
		TW_REAL("seconds", &seconds, 0.001, MAX_SECONDS),
		TW_TAKE("seed", take_seed, &seed),
		TW_TAKE("kind", take_kind, &kind),
		TW_LONG("victim", &victim_cpu, 0, 1023),
		TW_OPTS_END
	};

	tw_options(argc, argv, opts, help);
	kind_name = kind_words[kind - 1];

	/* Stop with the parent: a test or `tw bench` that dies leaves no thrashing
	 * behind.  The parent may have died before prctl: then getppid changed. */
	parent = getppid();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;      /* no SA_RESTART: a sleep ends at once */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) == -1 || sigaction(SIGINT, &sa, NULL) == -1)
		err(1, "sigaction");
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) == -1)
		err(1, "prctl(PR_SET_PDEATHSIG)");
	if (getppid() != parent)
		stop_signal = SIGTERM;

	if (cpu < 0)
		cpu = first_allowed_cpu();
	if (victim_cpu < 0)
		victim_cpu = last_allowed_cpu();
	pin_cpu(cpu);
	if ((kind & KIND_SHOOTDOWN) && victim_cpu != cpu &&
	    (errno = pthread_create(&nap, NULL, napper, NULL)) != 0)
		err(1, "pthread_create");
	/* A seed of its own is one --seed accepts, so a run can be repeated. */
	if (!seed.given)
		seed.value = ((uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid()) &
		    (uint64_t)INT64_MAX;
	rng_state = seed.value;
	lines = (size_t)mb << 20 >> 6;
	buf = make_buffer(lines);
	quiet_mean = share > 0 ? burst_ms * (1 - share) / share : INFINITY;

	t0 = t = now_s();
	deadline = seconds > 0 ? t0 + seconds : INFINITY;
	/* The first stretch is noisy with probability share: the process starts
	 * at a random moment of the alternation. */
	noisy = share >= 1 || (share > 0 && rng_unit() <= share);
	while (!stop_signal && t < deadline) {
		if (noisy) {
			double start = t;

			/* Always noisy is one burst, to the end. */
			end = share >= 1 ? deadline :
			    fmin(t + exponential(burst_ms) / 1000, deadline);
			if (!isinf(end)) {
				planned_noisy_s += end - t;
				planned_s += end - t;
			}
			bursts++;
			shooting = kind & KIND_SHOOTDOWN;
			while (!stop_signal && (t = now_s()) < end) {
				if (kind & KIND_SHOOTDOWN)
					shootdown();
				if (!(kind & KIND_CACHE))
					continue;
				for (i = 0; i < CHUNK_LINES; i++) {
					buf[pos * LINE + 8]++;
					if (++pos == lines)
						pos = 0;
				}
				for (k = 0; k < CHASE_STEPS; k++)
					at = *(volatile size_t *)(buf + at * LINE);
			}
			shooting = 0;
			noisy_s += t - start;
		} else {
			end = fmin(t + (isinf(quiet_mean) ? INFINITY :
			    exponential(quiet_mean) / 1000), deadline);
			if (!isinf(end))
				planned_s += end - t;
			sleep_until(end);
			t = now_s();
		}
		if (share < 1 && share > 0)
			noisy = !noisy;
	}
	t = now_s();
	why = stop_signal == SIGINT ? "sigint" : stop_signal ? "sigterm" : "time";
	printf("{\"schema\":\"timewrite-neighbour/1\",\"kind\":\"%s\",\"victim\":%ld,"
	    "\"cpu\":%ld,\"share_wanted\":%.6g,"
	    "\"burst_ms\":%.6g,\"mb\":%ld,\"seed\":%llu,\"seconds\":%.6f,"
	    "\"noisy_s\":%.6f,\"share\":%.6f,\"bursts\":%ld,\"stopped\":\"%s\","
	    "\"planned_s\":%.6f,\"planned_share\":%.6f,\"check\":%zu}\n",
	    kind_name, victim_cpu, cpu, share, burst_ms, mb, (unsigned long long)seed.value, t - t0, noisy_s,
	    t > t0 ? noisy_s / (t - t0) : 0.0, bursts, why, planned_s,
	    planned_s > 0 ? planned_noisy_s / planned_s : 0.0, at % 2);
	return 0;
}
