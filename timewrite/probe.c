/*
 * probe.c: find out whether the linked mechanism works here, before timing.
 *
 * Whether an entry works depends on the CPU and the kernel, not on the build:
 * a CPU that does not take sysenter or syscall from 32-bit code raises #UD
 * (SIGILL; which vendor does what is in scripts/twtools/machine/vendors.py),
 * a kernel booted with ia32_emulation=0 kills int 0x80 callers, and one
 * booted with vsyscall=none has no vsyscall page to call (SIGSEGV).  So the
 * call is tried in a child, where a fatal signal costs nothing, and a failure
 * becomes one line on stderr and exit 77 instead of a crash mid-measurement.
 *
 * The call is getppid, unless the mechanism names another in tw_probe_nr
 * (the vsyscall page and the 64-bit vDSO cannot make getppid; they are
 * probed with time).
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <err.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tw_syscall.h"
#include "tw_sysnr.h"

extern const char *__progname;

/* The default probe call; a stub's own definition replaces it at link time. */
__attribute__((weak)) const long tw_probe_nr = TW_NR_getppid;

/* How long a time() result may lag or lead libc's own reading, in seconds. */
#define TIME_SLACK	3600

int
tw_probe(char *why, size_t len)
{
	pid_t pid, parent;
	int status;
	/* Read through a volatile: a weak constant may be replaced at link time. */
	long nr = *(const volatile long *)&tw_probe_nr;
	long lo, hi;
	const char *what;
	time_t now;

	if (nr == TW_NR_getppid) {
		what = "getppid()";
		parent = getpid();
		lo = hi = (long)parent;
	} else if (nr == TW_NR_time) {
		what = "time()";
		if ((now = time(NULL)) == (time_t)-1)
			err(1, "time");
		lo = (long)now - 1;
		hi = (long)now + TIME_SLACK;
	} else
		errx(1, "tw_probe: the %s mechanism names probe call %ld, which "
		    "probe.c cannot check (getppid or time)", tw_mechanism, nr);
	fflush(NULL);
	if ((pid = fork()) == -1)
		err(1, "fork");
	if (pid == 0) {
		long r = tw_syscall3(nr, 0, 0, 0);

		/* Exit codes 0..2 tell the parent how the call came back. */
		if (r >= lo && r <= hi)
			_exit(0);
		_exit(r < 0 && r > -4096 ? 1 : 2);
	}
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			err(1, "waitpid");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		snprintf(why, len, "a %s through %s died with %s (%s)%s%s",
		    what, tw_mechanism, strsignal(WTERMSIG(status)),
		    sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?",
		    tw_mech_hint[0] ? "; " : "", tw_mech_hint);
	else
		snprintf(why, len, "a %s through %s returned %s%s%s",
		    what, tw_mechanism, WEXITSTATUS(status) == 1 ?
		    "an error" : "the wrong value",
		    tw_mech_hint[0] ? "; " : "", tw_mech_hint);
	return -1;
}

void
tw_require_mechanism(void)
{
	char why[512];

	if (tw_probe(why, sizeof(why)) == 0)
		return;
	fprintf(stderr, "%s: %s: unsupported: %s\n", __progname, tw_mechanism,
	    why);
	exit(TW_EXIT_UNSUPPORTED);
}
