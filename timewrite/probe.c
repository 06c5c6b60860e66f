/*
 * probe.c: find out whether the linked mechanism works here, before timing.
 *
 * Whether an entry works depends on the CPU and the kernel, not on the build:
 * a CPU that does not take sysenter or syscall from 32-bit code raises #UD
 * (SIGILL; which vendor does what is in scripts/twtools/machine/vendors.py),
 * and a kernel booted with ia32_emulation=0 kills int 0x80 callers.  So the
 * call is tried in a child, where a fatal signal costs nothing, and a failure
 * becomes one line on stderr and exit 77 instead of a crash mid-measurement.
 */
#include <sys/types.h>
#include <sys/wait.h>

#include <err.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tw_syscall.h"
#include "tw_sysnr.h"

extern const char *__progname;

int
tw_probe(char *why, size_t len)
{
	pid_t pid, parent;
	int status;

	parent = getpid();
	fflush(NULL);
	if ((pid = fork()) == -1)
		err(1, "fork");
	if (pid == 0) {
		long r = tw_syscall3(TW_NR_getppid, 0, 0, 0);

		/* Exit codes 0..2 tell the parent how the call came back. */
		if (r == (long)parent)
			_exit(0);
		_exit(r < 0 ? 1 : 2);
	}
	while (waitpid(pid, &status, 0) == -1)
		if (errno != EINTR)
			err(1, "waitpid");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		snprintf(why, len, "a getppid() through %s died with %s (%s)%s%s",
		    tw_mechanism, strsignal(WTERMSIG(status)),
		    sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?",
		    tw_mech_hint[0] ? "; " : "", tw_mech_hint);
	else
		snprintf(why, len, "a getppid() through %s returned %s%s%s",
		    tw_mechanism, WEXITSTATUS(status) == 1 ?
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
