/*
 * san: see san.h.
 */
#include "san.h"

#if defined(__SANITIZE_ADDRESS__)
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ	22
#endif

static int
populate(struct dl_phdr_info *info, size_t size, void *arg)
{
	const ElfW(Phdr) *ph;
	uintptr_t b, e, page = (uintptr_t)sysconf(_SC_PAGESIZE);
	int i;

	(void)size;
	(void)arg;
	for (i = 0; i < info->dlpi_phnum; i++) {
		ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
			continue;
		b = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
		e = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + page - 1) &
		    ~(page - 1);
		/* Before Linux 5.14 the advice is unknown: EINVAL, no harm. */
		(void)madvise((void *)b, e - b, MADV_POPULATE_READ);
	}
	return 1;	/* the program only: its segments hold the runtime's */
}

void
ovl_san_exit(void)
{
	dl_iterate_phdr(populate, NULL);
}

__attribute__((constructor)) static void
san_init(void)
{
	atexit(ovl_san_exit);
}
#else
void
ovl_san_exit(void)
{
}
#endif
