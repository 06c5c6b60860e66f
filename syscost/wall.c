/*
 * wall.c: --seccomp (wall.h).
 *
 * The filter is read whole before anything is installed, checked to be a whole
 * number of 8-byte instructions within the kernel's BPF_MAXINSNS, and handed
 * to seccomp(SECCOMP_SET_MODE_FILTER) unchanged: the kernel checks it again
 * (seccomp_check_filter) and computes its action cache from it at attach time
 * (seccomp_cache_prepare), so the process measures exactly the filter a
 * runtime that loaded the same bytes would have.  The flags are the runtime's
 * (--seccomp-flags): runc and crun pass SECCOMP_FILTER_FLAG_SPEC_ALLOW unless
 * the profile names its own, so that where the kernel's speculation
 * mitigations follow seccomp (spec_store_bypass_disable=seccomp) a container
 * does not get them; the JSON's speculation status says what this one got.
 */
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <err.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_out.h"
#include "tw_syscall.h"
#include "wall.h"

void
wall_seccomp_install(const char *path, long times, long flags)
{
	struct sock_fprog prog;
	struct stat st;
	ssize_t got;
	size_t len;
	long i;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		err(1, "--seccomp %s", path);
	if (fstat(fd, &st) == -1)
		err(1, "--seccomp %s", path);
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
	    st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
		errx(1, "--seccomp %s: not a seccomp filter (a regular file of whole "
		    "8-byte BPF instructions, at most %d of them, as seccomp_export_bpf "
		    "writes)", path, BPF_MAXINSNS);
	len = (size_t)st.st_size;
	if ((prog.filter = malloc(len)) == NULL)
		err(1, "--seccomp %s", path);
	if ((got = read(fd, prog.filter, len)) != (ssize_t)len)
		errx(1, "--seccomp %s: read %zd of its %zu bytes", path, got, len);
	close(fd);
	prog.len = (unsigned short)(len / sizeof(struct sock_filter));

	/* Without CAP_SYS_ADMIN the kernel asks for no_new_privs (EACCES). */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1)
		err(1, "prctl(PR_SET_NO_NEW_PRIVS)");
	for (i = 0; i < times; i++) {
		int e;

		if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog) == 0)
			continue;
		e = errno;
		/* PR_GET_SECCOMP answers EINVAL only where seccomp is not built in. */
		if (e == ENOSYS || (e == EINVAL && i == 0 &&
		    prctl(PR_GET_SECCOMP, 0, 0, 0, 0) == -1 && errno == EINVAL))
			errx(TW_EXIT_UNSUPPORTED, "this kernel has no seccomp "
			    "filters (CONFIG_SECCOMP_FILTER)");
		errno = e;
		err(1, "seccomp(SECCOMP_SET_MODE_FILTER) with %s, filter %ld of %ld",
		    path, i + 1, times);
	}
	free(prog.filter);
}

void
status_json(const char *const prefixes[])
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	int n = 0;

	putchar('{');
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		char *colon = strchr(line, ':'), *v;
		const char *const *p;

		for (p = prefixes; *p != NULL; p++)
			if (strncmp(line, *p, strlen(*p)) == 0)
				break;
		if (*p == NULL || colon == NULL)
			continue;
		*colon = '\0';
		for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
			;
		v[strcspn(v, "\n")] = '\0';
		if (n++)
			putchar(',');
		json_string(line);
		putchar(':');
		json_string(v);
	}
	if (f != NULL)
		fclose(f);
	putchar('}');
}
