/*
 * tw_syscall.h: the contract every kernel-entry mechanism provides.
 *
 * timewrite and syscost are written once and linked against one mechanism
 * (asm/<bits>/<mechanism>.asm, or libc.c for glibc's own wrappers).  Neither
 * program knows which: the variant is chosen by the build matrix in
 * variants/matrix, never by #ifdef here or in the core.
 */
#ifndef TW_SYSCALL_H
#define TW_SYSCALL_H

#include <stddef.h>

/*
 * Enter the kernel with system call `nr` and three arguments.  Returns the
 * raw kernel result: >= 0 on success, -errno on failure (errno is not set).
 * `nr` is a number of the ABI the mechanism enters by; see tw_sysnr.h.
 */
long tw_syscall3(long nr, long a1, long a2, long a3);

/* The mechanism's short name, as it appears in variant names. */
extern const char tw_mechanism[];

/*
 * One sentence telling what the mechanism depends on, for the probe's
 * message when it does not work.  It names the machine property, never a
 * CPU vendor: which vendor does what is kept in one table
 * (scripts/twtools/machine/vendors.py), and `scripts/tw doctor` applies it.
 */
extern const char tw_mech_hint[];

/*
 * Memory the mechanism can hand to the kernel.  Most mechanisms take any
 * address; 64-bit int 0x80 truncates pointers to 32 bits, so its variant
 * links alloc_low.c instead of alloc.c.  tw_alloc returns NULL on failure.
 */
void *tw_alloc(size_t n);
void tw_free(void *p, size_t n);

/*
 * Try the mechanism once in a child process.  Returns 0 when a getppid()
 * through it returns the right answer; otherwise fills `why` with the reason
 * (the signal that killed the child, or the wrong result, and tw_mech_hint).
 */
int tw_probe(char *why, size_t len);

/* Probe, and on failure print "<prog>: <mechanism>: unsupported: why" and exit 77. */
void tw_require_mechanism(void);

#define TW_EXIT_UNSUPPORTED 77

#endif
