/*
 * wall.h: --seccomp, a wall put up between this process and the kernel before
 * it measures (tw ab --wall): a classic BPF seccomp filter, as libseccomp
 * exports it (seccomp_export_bpf: the raw struct sock_filter array), installed
 * one or more times over; and the lines of /proc/self/status that show what
 * the kernel put in force.
 */
#ifndef SYSCOST_WALL_H
#define SYSCOST_WALL_H

/*
 * Install the filter in file `path` `times` times (a stack of identical
 * filters, as a runtime's plus an application's own), with no_new_privs set
 * first, as an unprivileged process must and runc does, passing seccomp() the
 * flags word a runtime passes (SECCOMP_FILTER_FLAG_SPEC_ALLOW, _LOG).  Exits 1 saying why
 * when the file is not a filter or the kernel refuses it; exits 77
 * (TW_EXIT_UNSUPPORTED) when this kernel has no seccomp filters.
 */
void wall_seccomp_install(const char *path, long times, long flags);

/* {"Seccomp":"2","Seccomp_filters":"1",...}: the lines of /proc/self/status
 * whose names start with one of the prefixes, NULL-terminated. */
void status_json(const char *const prefixes[]);

#endif
