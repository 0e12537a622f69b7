/* A program's own allocator, preloaded (LD_PRELOAD), as jemalloc or
 * tcmalloc are: every allocation function, counting the blocks of
 * COUNTMALLOC_SIZE bytes it hands out, written at exit to COUNTMALLOC_OUT.PID
 * (strata's own processes get it too, from the environment).
 * test_objects.py runs an extension under it with --objects: the
 * extension's malloc must still reach this allocator, every time, and
 * strata must still see it. It forwards to glibc's own functions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static size_t watched;
static unsigned long count;

static void see(size_t n)
{
	if (watched && n == watched)
		__atomic_add_fetch(&count, 1, __ATOMIC_RELAXED);
}

void *malloc(size_t n) { see(n); return __libc_malloc(n); }
void *calloc(size_t k, size_t n) { see(k * n); return __libc_calloc(k, n); }
void *realloc(void *p, size_t n) { see(n); return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t a, size_t n) { see(n); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { see(n); return __libc_memalign(a, n); }
void *valloc(size_t n) { see(n); return __libc_memalign(4096, n); }
int posix_memalign(void **pp, size_t a, size_t n)
{
	see(n);
	void *p = __libc_memalign(a, n);
	if (!p)
		return 12; /* ENOMEM */
	*pp = p;
	return 0;
}

__attribute__((constructor)) static void start(void)
{
	const char *s = getenv("COUNTMALLOC_SIZE");
	watched = s ? strtoul(s, NULL, 10) : 0;
}

__attribute__((destructor)) static void end(void)
{
	const char *out = getenv("COUNTMALLOC_OUT");
	char path[4096];
	snprintf(path, sizeof(path), "%s.%d", out ? out : "", (int)getpid());
	FILE *f = out ? fopen(path, "w") : NULL;
	if (f) {
		fprintf(f, "%lu\n", count);
		fclose(f);
	}
}
