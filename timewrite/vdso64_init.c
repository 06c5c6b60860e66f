/*
 * vdso64_init.c: find the 64-bit vDSO's time functions for the "vdso"
 * mechanism of 64-bit code (asm/64/vdso.asm).
 *
 * The kernel maps a small shared object, the vDSO, into every process and
 * passes its address in the auxiliary vector (AT_SYSINFO_EHDR).  Its
 * functions read the clock from a page the kernel keeps up to date, so a
 * call to them enters no kernel at all: they are the baseline of what
 * avoiding the kernel saves.  glibc finds them through its dynamic loader;
 * this file finds them itself, with a lookup in the image's dynamic symbol
 * table, so that the stub calls exactly those functions and nothing of
 * glibc's around them.  In the spirit of the kernel's
 * tools/testing/selftests/vDSO/parse_vdso.c, but smaller: the image is
 * trusted (the kernel made it), and only three names are wanted.
 *
 * The lookup: the ELF header gives the program headers; the PT_LOAD with
 * file offset 0 gives the load bias (the image is linked at a base of its
 * own), PT_DYNAMIC the dynamic section; that names the symbol and string
 * tables and a hash table, whose size says how many symbols there are
 * (DT_HASH's nchain, or, for an image with DT_GNU_HASH only, the highest
 * symbol index its chains reach).  A name matches a defined function
 * symbol of global or weak binding; symbol versions are not checked (each
 * name has one definition, LINUX_2.6).
 *
 * What the stub reads, in this order (gettimeofday, clock_gettime, time):
 *   tw_nrs            the system call numbers the stub maps to functions
 *   tw_vdso64_fn      the functions, or null when the vDSO lacks one
 *   tw_vdso64_int     1 where the function returns int (the stub then
 *                     sign-extends eax), 0 where it returns time_t
 * A kernel booted with vdso=0 passes no AT_SYSINFO_EHDR: every pointer is
 * null, the stub returns -ENOSYS, and the probe reports the mechanism as
 * unsupported.
 */
#include <sys/auxv.h>

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "tw_syscall.h"
#include "tw_sysnr.h"

#define NFN 3

const long tw_nrs[NFN + 1] = {
	TW_NR_gettimeofday, TW_NR_clock_gettime, TW_NR_time, -1,
};
const long tw_probe_nr = TW_NR_time;
void *tw_vdso64_fn[NFN];
const long tw_vdso64_int[NFN] = { 1, 1, 0 };

static const char *const names[NFN] = {
	"__vdso_gettimeofday", "__vdso_clock_gettime", "__vdso_time",
};

/* The number of symbols a DT_GNU_HASH table covers: past its highest chain's end. */
static unsigned long
gnu_hash_nsyms(const uint32_t *h)
{
	uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
	const uint32_t *buckets = h + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t i, last = 0;

	for (i = 0; i < nbuckets; i++)
		if (buckets[i] > last)
			last = buckets[i];
	if (last < symoffset)
		return symoffset;
	while ((chain[last - symoffset] & 1) == 0)
		last++;
	return (unsigned long)last + 1;
}

__attribute__((constructor)) static void
tw_vdso64_init(void)
{
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
	const ElfW(Phdr) *ph;
	const ElfW(Dyn) *dyn = NULL, *d;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const uint32_t *hash = NULL, *gnu_hash = NULL;
	uintptr_t base, bias = 0;
	unsigned long nsyms, i;
	int k, have_load = 0;

	if (eh == NULL || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
		return;
	base = (uintptr_t)eh;
	ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
	for (k = 0; k < eh->e_phnum; k++) {
		if (ph[k].p_type == PT_LOAD && ph[k].p_offset == 0 && !have_load) {
			bias = base - ph[k].p_vaddr;
			have_load = 1;
		} else if (ph[k].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(uintptr_t)ph[k].p_vaddr;
	}
	if (!have_load || dyn == NULL)
		return;
	dyn = (const ElfW(Dyn) *)((uintptr_t)dyn + bias);
	for (d = dyn; d->d_tag != DT_NULL; d++) {
		uintptr_t p = (uintptr_t)d->d_un.d_ptr + bias;

		switch (d->d_tag) {
		case DT_SYMTAB:
			symtab = (const ElfW(Sym) *)p;
			break;
		case DT_STRTAB:
			strtab = (const char *)p;
			break;
		case DT_HASH:
			hash = (const uint32_t *)p;
			break;
		case DT_GNU_HASH:
			gnu_hash = (const uint32_t *)p;
			break;
		}
	}
	if (symtab == NULL || strtab == NULL || (hash == NULL && gnu_hash == NULL))
		return;
	nsyms = hash != NULL ? hash[1] : gnu_hash_nsyms(gnu_hash);
	for (i = 0; i < nsyms; i++) {
		const ElfW(Sym) *s = &symtab[i];
		int bind = ELF64_ST_BIND(s->st_info);

		if (ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
		    s->st_shndx == SHN_UNDEF ||
		    (bind != STB_GLOBAL && bind != STB_WEAK))
			continue;
		for (k = 0; k < NFN; k++)
			if (strcmp(strtab + s->st_name, names[k]) == 0)
				tw_vdso64_fn[k] = (void *)(s->st_value + bias);
	}
}
