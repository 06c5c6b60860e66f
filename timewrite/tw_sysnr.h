/*
 * tw_sysnr.h: syscall numbers of the ABI a variant enters by.
 *
 * The 32-bit mechanisms (and int 0x80 from 64-bit code, which the kernel
 * always treats as the i386 ABI) take i386 numbers: write is 4 there but 1 in
 * the x86-64 table.  The build matrix defines TW_ABI32 for those variants, so
 * the names below always mean the table the kernel will read.  Numbers come
 * from the kernel's UAPI headers, never from literals.
 */
#ifndef TW_SYSNR_H
#define TW_SYSNR_H

#ifdef TW_ABI32
#include <asm/unistd_32.h>
#else
#include <asm/unistd_64.h>
#endif

#define TW_NR_write   __NR_write
#define TW_NR_getppid __NR_getppid
#define TW_NR_writev  __NR_writev
#define TW_NR_gettimeofday  __NR_gettimeofday
#define TW_NR_clock_gettime __NR_clock_gettime
#define TW_NR_time    __NR_time
#define TW_NR_getcpu  __NR_getcpu

/*
 * A number no kernel assigns: the kernel answers -ENOSYS after entry and
 * dispatch, doing no work.  syscost's "null" operation uses it.
 */
#define TW_NR_invalid 0x7fff

#endif
