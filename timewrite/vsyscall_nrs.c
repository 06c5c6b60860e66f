/*
 * vsyscall_nrs.c: the system calls the vsyscall page can make, by number.
 *
 * asm/64/vsyscall.asm maps a system call number to the page's entry for the
 * same function; NASM cannot read the kernel's headers, so the numbers come
 * from here (tw_sysnr.h), in the order the stub expects: gettimeofday, time,
 * getcpu.  The same list tells syscost which operations the mechanism can
 * make at all (tw_syscall.h, tw_nrs), and the probe calls time, since the
 * page has no getppid.
 */
#include "tw_syscall.h"
#include "tw_sysnr.h"

const long tw_nrs[] = { TW_NR_gettimeofday, TW_NR_time, TW_NR_getcpu, -1 };
const long tw_probe_nr = TW_NR_time;
