/*
 * tw_syscall.h: the contract every kernel-entry mechanism provides.
 *
 * timewrite and syscost are written once and linked against one mechanism
 * (asm/<bits>/<mechanism>.asm, or libc.c for glibc's own wrappers).  Neither
 * program knows which: the variant is chosen by the mechanism registry,
 * variants/registry, never by #ifdef here or in the core.
 */
#ifndef TW_SYSCALL_H
#define TW_SYSCALL_H

#include <stddef.h>

/*
 * Enter the kernel with system call `nr` and three arguments.  Returns the
 * raw kernel result: >= 0 on success, -errno on failure (errno is not set).
 * `nr` is a number of the ABI the mechanism enters by; see tw_sysnr.h.
 * A mechanism that can make only some calls (the vsyscall page, the 64-bit
 * vDSO) returns -ENOSYS for any other number without entering anything,
 * and says which it can make in tw_nrs.
 */
long tw_syscall3(long nr, long a1, long a2, long a3);

/*
 * Code that runs inside a timed loop (the loops themselves, the C stubs they call)
 * starts at a cache line, as the asm stubs do (asm/include/tw.inc): where a
 * function lies in its 64-byte line and fetch block is part of what a call
 * through it costs, and without this it lies wherever the code linked before
 * it ends.  A change to syscost's option parsing alone moved the 64-bit libc
 * stub and the C call loop by 32 bytes, and 64-libc write-devnull by -0.6%
 * (tw ab of the two builds, on an Intel Xeon guest).
 */
#define TW_TIMED_CODE __attribute__((aligned(64)))

/*
 * Loop shapes.  How the entry sits in a timed loop changes what one call
 * costs: after the kernel returns, the first `ret` can miss in the CPU's
 * return-stack predictor, and every stub and libc wrapper returns by `ret`.
 * syscost --shape picks one of three (the registry's `shapes` column says
 * which each mechanism has):
 *
 *   ret     tw_syscall3, called through a pointer: the contract above.
 *   jmp     tw_syscall3_jmp: the same stub body, leaving by an indirect
 *           jump (pop the return address into a caller-saved register, jmp
 *           to it) instead of ret.
 *   inline  tw_loop3: the entry in the loop itself, no call and no ret per
 *           pass.  tw_loop3_empty is the identical loop with the entry
 *           replaced by loading an accepted result, so that the loop's own
 *           cost is measured and subtracted exactly as the empty call is for
 *           the other shapes.
 *
 * The three are optional: they are declared weak, so in a program whose
 * mechanism lacks one its address is null (syscost then refuses the shape).
 * The 32-bit sysenter and syscall stubs have no inline shape: the kernel
 * returns from those instructions to the vDSO's landing pad, whose ret needs
 * the return address of a call.  The 32-bit vDSO's inline shape is the call
 * to __kernel_vsyscall in the loop (its own ret comes back into the loop).
 * libc has the ret shape only.  Every function has an ELF size and
 * call-frame information, as tw_syscall3 does (asm/include/tw.inc).
 */
long tw_syscall3_jmp(long nr, long a1, long a2, long a3) __attribute__((weak));

/* What tw_loop3 repeats, and what it reports. */
struct tw_loop {
	long nr, a1, a2, a3;	/* in: the call, as tw_syscall3 takes it */
	long lo, hi;		/* in: the results accepted, lo <= r <= hi */
	long bad;		/* out: how many results fell outside [lo, hi] */
	long first_bad;		/* out: the first of them (when bad > 0) */
};

/*
 * n calls (n >= 0) with the entry inline in the loop.  Returns l->bad.  Each
 * result is compared with lo and hi as a signed long of the mechanism's ABI
 * (the i386 ABI's 32-bit results are sign-extended).
 */
long tw_loop3(struct tw_loop *l, long n) __attribute__((weak));
long tw_loop3_empty(struct tw_loop *l, long n) __attribute__((weak));

/*
 * The system call numbers tw_syscall3 can make, ending with -1, for the
 * mechanisms that do not enter the kernel by an instruction that takes any
 * number.  Null (undefined) in the others.
 */
extern const long tw_nrs[] __attribute__((weak));

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
 * The call the probe makes: a system call number of the mechanism's ABI.
 * probe.c defines it weakly as getppid; a mechanism that cannot make
 * getppid defines it as one it can (the vsyscall page and the 64-bit vDSO:
 * time).  probe.c knows how to check getppid and time only.
 */
extern const long tw_probe_nr;

/*
 * Try the mechanism once in a child process.  Returns 0 when the probe's
 * call (tw_probe_nr) through it returns the right answer; otherwise fills
 * `why` with the reason (the signal that killed the child, or the wrong
 * result, and tw_mech_hint).
 */
int tw_probe(char *why, size_t len);

/* Probe, and on failure print "<prog>: <mechanism>: unsupported: why" and exit 77. */
void tw_require_mechanism(void);

#define TW_EXIT_UNSUPPORTED 77

#endif
