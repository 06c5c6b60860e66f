/*
 * vdso_init.c: find __kernel_vsyscall for the 32-bit "vdso" mechanism.
 *
 * The kernel tells each 32-bit process where its vDSO entry point is through
 * the AT_SYSINFO auxiliary vector entry; glibc's i686 build saves it in the
 * TCB and calls *%gs:0x10.  asm/32/vdso.asm calls through tw_vsyscall instead,
 * which is the same indirect call without relying on glibc's TCB layout.  A
 * kernel started with vdso32=0 gives no AT_SYSINFO; the stub then returns
 * -ENOSYS and the probe reports the mechanism as unsupported.
 */
#include <sys/auxv.h>

unsigned long tw_vsyscall;

__attribute__((constructor)) static void
tw_vsyscall_init(void)
{
	tw_vsyscall = getauxval(AT_SYSINFO);
}
