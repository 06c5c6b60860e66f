/*
 * libc.c: the "libc" mechanism, glibc's own wrappers.
 *
 * This is the reference every hand-written stub is compared with: the path a
 * normal program takes.  write and getppid go through glibc's functions of
 * those names (so a 32-bit build enters however this machine's 32-bit glibc
 * does, which is the seed report's question); anything else goes through
 * glibc's generic syscall(), which enters by the same instruction.  glibc
 * reports failure as -1 with errno; the contract wants -errno, so convert.
 *
 * Kernel side: whatever this machine's C library does.  x86-64 glibc inlines
 * syscall in its wrappers; i686 glibc calls __kernel_vsyscall through
 * %gs:0x10 (the AT_SYSINFO pointer it keeps in the TCB); a generic i386/i586
 * build inlines int $0x80.  `scripts/tw classify-libc` says which, with the
 * instructions.
 */
#include <errno.h>
#include <unistd.h>

#include "tw_syscall.h"
#include "tw_sysnr.h"

const char tw_mechanism[] = "libc";
const char tw_mech_hint[] = "";

TW_TIMED_CODE long
tw_syscall3(long nr, long a1, long a2, long a3)
{
	long r;

	switch (nr) {
	case TW_NR_write:
		r = write((int)a1, (const void *)a2, (size_t)a3);
		break;
	case TW_NR_getppid:
		return getppid();
	default:
		r = syscall(nr, a1, a2, a3);
		break;
	}
	return r == -1 ? -errno : r;
}
