/* The library test_got.c redirects: calls to malloc and free through its
 * PLT (JUMP_SLOT) and malloc's address taken (GLOB_DAT). Built twice by
 * unit.mk: bound at load under RELRO (-z now -z relro), and lazily bound
 * without RELRO. */
#include <stdlib.h>

void *fx_alloc(size_t n)
{
	return malloc(n);
}

void fx_free(void *p)
{
	free(p);
}

void *fx_malloc_addr(void)
{
	void *(*volatile f)(size_t) = malloc;
	return (void *)f;
}
