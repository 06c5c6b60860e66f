/*
 * speculation.c: --speculation and the status the JSON reports (speculation.h).
 */
#include <sys/prctl.h>

#include <err.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "speculation.h"
#include "tw_syscall.h"

const char *const spec_names[4] = { NULL, "ssbd", "indirect-branch", "all" };

/* "ssbd" and "indirect-branch" as prctl names them, and disable each asked. */
void
speculation_apply(enum spec s)
{
	static const struct {
		enum spec which;
		const char *name;
		unsigned long ctrl;
	} ctl[] = {
		{ SPEC_SSBD, "ssbd", PR_SPEC_STORE_BYPASS },
		{ SPEC_IB, "indirect-branch", PR_SPEC_INDIRECT_BRANCH },
	};
	size_t i;

	for (i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++) {
		int st;

		if (s != SPEC_ALL && s != ctl[i].which)
			continue;
		st = prctl(PR_GET_SPECULATION_CTRL, ctl[i].ctrl, 0, 0, 0);
		if (st == -1) {
			if (errno == EINVAL || errno == ENODEV)
				errx(TW_EXIT_UNSUPPORTED, "%s: this kernel has no such "
				    "speculation control (PR_GET_SPECULATION_CTRL: %s)",
				    ctl[i].name, strerror(errno));
			err(1, "prctl(PR_GET_SPECULATION_CTRL, %s)", ctl[i].name);
		}
		if (!(st & PR_SPEC_PRCTL))
			errx(TW_EXIT_UNSUPPORTED, "%s: the kernel does not leave it "
			    "to prctl (%s)", ctl[i].name,
			    st == PR_SPEC_NOT_AFFECTED ? "this CPU is not affected" :
			    st & PR_SPEC_FORCE_DISABLE ? "force-disabled" :
			    st & PR_SPEC_DISABLE ? "always disabled" :
			    st & PR_SPEC_ENABLE ? "always enabled" : "no per-task control");
		if (prctl(PR_SET_SPECULATION_CTRL, ctl[i].ctrl, PR_SPEC_DISABLE, 0, 0) == -1) {
			if (errno == ENXIO || errno == EPERM)
				errx(TW_EXIT_UNSUPPORTED, "%s: the kernel refused to "
				    "disable it for this process (%s)", ctl[i].name,
				    strerror(errno));
			err(1, "prctl(PR_SET_SPECULATION_CTRL, %s, PR_SPEC_DISABLE)",
			    ctl[i].name);
		}
	}
}
