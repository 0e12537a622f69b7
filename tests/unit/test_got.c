/*
 * test_got.c — redirecting another object's calls through its GOT
 * (src/agent/got.c), on two builds of fixture_got.c: one bound at load
 * under RELRO, one lazily bound without it.
 *
 * - got_apply takes the JUMP_SLOT (calls) and GLOB_DAT (address taken)
 *   slots of the objects the mask picks, and none of the others, bound or
 *   still a lazy stub; calls then reach the hook; a RELRO page is
 *   read-only again afterwards;
 * - got_restore puts back exactly what was there, after which calls no
 *   longer reach the hook;
 * - a slot holding somebody else's hook is left alone, and not put back;
 * - got_refresh takes an object loaded after got_apply, and only while on;
 * - got_bound says what a bound object's call reaches.
 *
 * The argument is the directory holding the two fixture builds.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test.h"
#include "../../src/agent/got.h"

static const char *dir;
static void *(*real_malloc)(size_t);
static void (*real_free)(void *);
static int n_malloc, n_free, n_other;

static void *hk_malloc(size_t n)
{
	n_malloc++;
	return real_malloc(n);
}

static void hk_free(void *p)
{
	n_free++;
	real_free(p);
}

static void *other_malloc(size_t n)
{
	n_other++;
	return real_malloc(n);
}

struct fx {
	void *h;
	void *(*alloc)(size_t);
	void (*free)(void *);
	void *(*addr)(void);
};

static struct fx load(const char *which)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/fixture_got_%s.so", dir, which);
	struct fx f = { dlopen(path, RTLD_NOW | RTLD_LOCAL), 0, 0, 0 };
	if (!f.h) {
		fprintf(stderr, "test_got: %s\n", dlerror());
		exit(1);
	}
	*(void **)&f.alloc = dlsym(f.h, "fx_alloc");
	*(void **)&f.free = dlsym(f.h, "fx_free");
	*(void **)&f.addr = dlsym(f.h, "fx_malloc_addr");
	return f;
}

/* Only the fixtures are redirected (never this test, nor libc). */
static unsigned only_fixtures(const struct dl_phdr_info *info, void *arg)
{
	(void)arg;
	return info->dlpi_name && strstr(info->dlpi_name, "fixture_got_") ? 3u : 0u;
}

static struct got_fn fns[2];

/* The protection of the page holding `p`, from /proc/self/maps. */
static void prot_of(const void *p, char out[5])
{
	strcpy(out, "????");
	FILE *m = fopen("/proc/self/maps", "r");
	if (!m)
		return;
	char line[512];
	while (fgets(line, sizeof(line), m)) {
		unsigned long lo, hi;
		char perm[5];
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perm) == 3 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
			memcpy(out, perm, 5);
			break;
		}
	}
	fclose(m);
}

static void test_apply_and_restore(void)
{
	struct fx now = load("now");
	/* lazily bound: its free slot still holds the stub that binds it at
	 * the first call (and holds it again once put back) */
	struct fx lazy = load("lazy");
	CHECK(now.addr() == (void *)real_malloc);

	n_malloc = n_free = 0;
	int took = got_apply(fns, 2, only_fixtures, NULL);
	/* In each: malloc's GLOB_DAT (ld has the PLT call use the slot of
	 * the address taken) and free's JUMP_SLOT. */
	CHECK_EQ(took, 4);
	CHECK(got_enabled());
	CHECK(now.addr() == (void *)hk_malloc);
	CHECK(lazy.addr() == (void *)hk_malloc);
	void *a = now.alloc(10), *b = lazy.alloc(20);
	now.free(a);
	lazy.free(b);
	CHECK_EQ(n_malloc, 2);
	CHECK_EQ(n_free, 2);
	/* the test's own calls are not redirected */
	free(malloc(1));
	CHECK_EQ(n_malloc, 2);
	/* a second apply while on takes nothing more */
	CHECK_EQ(got_apply(fns, 2, only_fixtures, NULL), 0);

	/* RELRO: the GLOB_DAT slot's page is read-only again */
	Dl_info di;
	CHECK(dladdr((void *)now.alloc, &di));
	char perm[5];
	/* find the slot: the word in the fixture holding hk_malloc */
	struct link_map *lm = NULL;
	dlinfo(now.h, RTLD_DI_LINKMAP, &lm);
	const ElfW(Dyn) *d = lm->l_ld;
	uintptr_t relro_slot = 0;
	for (; d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_PLTGOT)
			relro_slot = d->d_un.d_ptr;
	CHECK(relro_slot != 0);
	if (relro_slot) {
		prot_of((void *)relro_slot, perm);
		CHECK(perm[0] == 'r' && perm[1] == '-');
	}

	CHECK_EQ(got_restore(), 4);
	CHECK(!got_enabled());
	CHECK(now.addr() == (void *)real_malloc);
	CHECK(lazy.addr() == (void *)real_malloc);
	n_malloc = n_free = 0;
	a = now.alloc(10);
	b = lazy.alloc(20);
	now.free(a);
	lazy.free(b);
	CHECK_EQ(n_malloc, 0);
	CHECK_EQ(n_free, 0);
	if (relro_slot) {
		prot_of((void *)relro_slot, perm);
		CHECK(perm[0] == 'r' && perm[1] == '-');
	}
	dlclose(lazy.h);
	dlclose(now.h);
}

/* The fixture's GLOB_DAT slot for malloc (what fx_malloc_addr reads). */
static void **glob_dat_slot(void *h)
{
	struct link_map *lm = NULL;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm)
		return NULL;
	const ElfW(Rela) *r = NULL;
	size_t relasz = 0;
	const ElfW(Sym) *sym = NULL;
	const char *str = NULL;
	for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_RELA)
			r = (const ElfW(Rela) *)d->d_un.d_ptr;
		else if (d->d_tag == DT_RELASZ)
			relasz = d->d_un.d_val;
		else if (d->d_tag == DT_SYMTAB)
			sym = (const ElfW(Sym) *)d->d_un.d_ptr;
		else if (d->d_tag == DT_STRTAB)
			str = (const char *)d->d_un.d_ptr;
	}
	for (size_t i = 0; r && sym && str && i < relasz / sizeof(*r); i++)
		if (ELF64_R_TYPE(r[i].r_info) == R_X86_64_GLOB_DAT &&
		    !strcmp(str + sym[ELF64_R_SYM(r[i].r_info)].st_name, "malloc"))
			return (void **)(lm->l_addr + r[i].r_offset);
	return NULL;
}

/* Writes a slot as another hooking tool would (RELRO made writable). */
static void poke(void **slot, void *v)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	void *page = (void *)((uintptr_t)slot & ~(pg - 1));
	CHECK(mprotect(page, pg, PROT_READ | PROT_WRITE) == 0);
	*slot = v;
	mprotect(page, pg, PROT_READ);
}

static void test_someone_elses_slot(void)
{
	struct fx now = load("now");
	void **slot = glob_dat_slot(now.h);
	CHECK(slot != NULL);
	if (!slot)
		return;
	CHECK(*slot == (void *)real_malloc);
	poke(slot, (void *)other_malloc);
	/* free's slot is taken, the foreign one is not */
	CHECK_EQ(got_apply(fns, 2, only_fixtures, NULL), 1);
	CHECK(now.addr() == (void *)other_malloc);
	n_malloc = n_other = n_free = 0;
	now.free(now.alloc(3));
	CHECK_EQ(n_malloc, 0);
	CHECK_EQ(n_other, 1);
	CHECK_EQ(n_free, 1);
	/* and it is not put back to what we never took */
	CHECK_EQ(got_restore(), 1);
	CHECK(now.addr() == (void *)other_malloc);
	/* a slot changed by somebody else after we took it stays theirs */
	poke(slot, (void *)real_malloc);
	CHECK_EQ(got_apply(fns, 2, only_fixtures, NULL), 2);
	CHECK(now.addr() == (void *)hk_malloc);
	poke(slot, (void *)other_malloc);
	CHECK_EQ(got_restore(), 1);
	CHECK(now.addr() == (void *)other_malloc);
	poke(slot, (void *)real_malloc);
	n_other = 0;
	dlclose(now.h);
}

static void test_refresh_takes_later_objects(void)
{
	struct fx now = load("now");
	CHECK_EQ(got_apply(fns, 2, only_fixtures, NULL), 2);
	CHECK(!got_loaded_since());
	struct fx lazy = load("lazy");
	CHECK(got_loaded_since());
	CHECK(lazy.addr() == (void *)real_malloc);
	CHECK_EQ(got_refresh(), 2);
	CHECK(!got_loaded_since());
	CHECK(lazy.addr() == (void *)hk_malloc);
	n_malloc = 0;
	lazy.free(lazy.alloc(5));
	CHECK_EQ(n_malloc, 1);
	CHECK_EQ(got_restore(), 4);
	/* off: a refresh takes nothing */
	dlclose(lazy.h);
	lazy = load("lazy");
	CHECK_EQ(got_refresh(), 0);
	CHECK(lazy.addr() == (void *)real_malloc);
	dlclose(lazy.h);
	dlclose(now.h);
}

static void test_bound(void)
{
	struct fx now = load("now");
	CHECK(got_bound((void *)now.alloc, "malloc") == (void *)real_malloc);
	CHECK(got_bound((void *)now.alloc, "free") == (void *)real_free);
	CHECK(got_bound((void *)now.alloc, "no_such_function") == NULL);
	dlclose(now.h);
}

int main(int argc, char **argv)
{
	dir = argc > 1 ? argv[1] : ".";
	*(void **)&real_malloc = dlsym(RTLD_DEFAULT, "malloc");
	*(void **)&real_free = dlsym(RTLD_DEFAULT, "free");
	fns[0] = (struct got_fn){ "malloc", (void *)hk_malloc, (void *)real_malloc, NULL };
	fns[1] = (struct got_fn){ "free", (void *)hk_free, (void *)real_free, NULL };
	RUN(test_apply_and_restore);
	RUN(test_someone_elses_slot);
	RUN(test_refresh_takes_later_objects);
	RUN(test_bound);
	return test_summary();
}
