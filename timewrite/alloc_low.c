/*
 * alloc_low.c: buffers below 4 GiB, for int 0x80 from 64-bit code.
 *
 * int 0x80 always enters the kernel's i386 ABI, which reads only the low 32
 * bits of each argument register.  A 64-bit process's heap and stack live far
 * above 4 GiB, so a pointer to them would be silently truncated and the
 * kernel would read some other address (usually -EFAULT).  MAP_32BIT places
 * the mapping in the first 2 GiB, where truncation changes nothing.  The price
 * is that no buffer can exceed what is free down there: a larger input is
 * refused before anything is written.
 */
#include <sys/mman.h>

#include "tw_syscall.h"

void *
tw_alloc(size_t n)
{
	void *p;

	p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void
tw_free(void *p, size_t n)
{
	if (p != NULL)
		munmap(p, n ? n : 1);
}
