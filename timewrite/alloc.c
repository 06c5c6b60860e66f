/*
 * alloc.c: buffers for mechanisms that take any user address.
 *
 * Anonymous mmap rather than malloc so that a multi-gigabyte input does not
 * go through the heap, and so alloc_low.c can replace this file one for one.
 */
#include <sys/mman.h>

#include "tw_syscall.h"

void *
tw_alloc(size_t n)
{
	void *p;

	p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void
tw_free(void *p, size_t n)
{
	if (p != NULL)
		munmap(p, n ? n : 1);
}
