/*
 * clock.c: syscost's clock choice and TSC calibration (clock.h).
 */
#include <cpuid.h>
#include <err.h>
#include <stdint.h>
#include <time.h>

#include "clock.h"

enum clk clk;
int have_rdtscp;
double tsc_hz;

/* Clock id's time in ns; a failure ends the program, naming the clock. */
static inline uint64_t
clock_ns(clockid_t id, const char *name)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) == -1)
		err(1, "clock_gettime(%s)", name);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC_RAW, "CLOCK_MONOTONIC_RAW");
}

uint64_t
thread_cpu_ns(void)
{
	return clock_ns(CLOCK_THREAD_CPUTIME_ID, "CLOCK_THREAD_CPUTIME_ID");
}

double
ticks_to_ns(uint64_t t)
{
	return (double)t * 1e9 / tsc_hz;
}

/* Bit `bit` of EDX of extended CPUID leaf `leaf`; 0 where the CPU has no such leaf. */
static int
ext_edx_bit(unsigned leaf, int bit)
{
	unsigned a, b, c, d;

	if (__get_cpuid_max(0x80000000, NULL) < leaf)
		return 0;
	__cpuid(leaf, a, b, c, d);
	return (d >> bit) & 1;
}

/* CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every state. */
static int
invariant_tsc(void)
{
	return ext_edx_bit(0x80000007, 8);
}

/* CPUID 0x80000001 EDX bit 27: the CPU has rdtscp. */
static int
cpu_has_rdtscp(void)
{
	return ext_edx_bit(0x80000001, 27);
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

const char *
clock_choose(int asked, double given_hz, double calibrate_ms)
{
	const char *why;

	have_rdtscp = cpu_has_rdtscp();
	if (asked == CLK_MONO) {
		clk = CLK_MONO;
		why = "asked for (--clock monotonic)";
	} else if (invariant_tsc()) {
		clk = CLK_TSC;
		why = "invariant TSC (CPUID 0x80000007 EDX bit 8)";
	} else if (asked == CLK_TSC) {
		clk = CLK_TSC;
		why = "asked for (--clock tsc) although the TSC is not invariant";
	} else {
		clk = CLK_MONO;
		why = "the TSC is not invariant (CPUID 0x80000007 EDX bit 8 clear)";
	}
	if (clk == CLK_MONO)
		tsc_hz = 1e9;
	else if (given_hz > 0)
		tsc_hz = given_hz;
	else
		tsc_hz = calibrate_tsc(calibrate_ms);
	return why;
}
