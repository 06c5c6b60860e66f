/* cpu.c: the first and last allowed CPUs, and pinning to one (cpu.h). */
#include <err.h>
#include <sched.h>

#include "cpu.h"

long
last_allowed_cpu(void)
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

long
first_allowed_cpu(void)
{
	cpu_set_t set;
	long i;

	if (sched_getaffinity(0, sizeof(set), &set) == -1)
		err(1, "sched_getaffinity");
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			return i;
	errx(1, "sched_getaffinity: no CPU allowed");
}

void
pin_cpu(long cpu)
{
	cpu_set_t set;

	if (cpu >= CPU_SETSIZE)
		errx(1, "CPU %ld is beyond CPU_SETSIZE", cpu);
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) == -1)
		err(1, "sched_setaffinity(CPU %ld)", cpu);
}
