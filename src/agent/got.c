/*
 * got.c — redirecting other objects' calls to named functions by
 * rewriting their GOT slots, and putting the slots back.
 *
 * A call from a shared object to a function of another (an extension's
 * malloc) goes through a slot of its global offset table: the PLT stub
 * jumps through a JUMP_SLOT entry, code built with -fno-plt or taking the
 * function's address loads a GLOB_DAT entry. Rewriting those slots in the
 * objects chosen catches exactly their calls, and writing back the value
 * found leaves nothing behind, which an interposed (preloaded) function
 * could not. objects.c uses it for libc's allocation functions under
 * --objects (docs/objects.md says why).
 *
 * Rules:
 * - A slot is taken only when it holds the function's real address (bound
 *   already) or an address inside its own object (a lazy-binding stub not
 *   yet resolved). Any other value is somebody else's hook, or a binding
 *   we do not know: left alone.
 * - It is put back only if it still holds our hook, to the value found.
 * - Slots under RELRO (read-only once relocated) are made writable for the
 *   write and read-only again; a slot in no writable segment is skipped.
 * - Objects unloaded meanwhile are forgotten, not written to.
 *
 * Not for the signal path: dl_iterate_phdr, mprotect and a mutex. x86-64.
 */
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "got.h"

struct obj {
	uintptr_t addr;         /* dlpi_addr */
	const void *phdr;       /* dlpi_phdr: with addr, who the object is */
	int present;            /* seen in this walk (prune, got_restore) */
	uint32_t idx;           /* prune: its index once the absent are gone */
};

struct slot {
	uintptr_t *where;
	uintptr_t old;
	uintptr_t hook;
	uint32_t obj;
	uint8_t relro;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct obj *objs;
static size_t nobjs, capobjs;
static struct slot *slots;
static size_t nslots, capslots;
static unsigned long long seen_adds = ~0ull, seen_subs = ~0ull;

/* Arrays grown with mmap: this runs inside allocation hooks' callers, so
 * it does not allocate through malloc. */
static int grow(void **arr, size_t *cap, size_t want, size_t elem)
{
	if (want <= *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 256;
	while (ncap < want)
		ncap *= 2;
	void *p = mmap(NULL, ncap * elem, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	if (*arr) {
		memcpy(p, *arr, *cap * elem);
		munmap(*arr, *cap * elem);
	}
	*arr = p;
	*cap = ncap;
	return 0;
}

/* Where the object is mapped (PT_LOAD), writable segments, and RELRO. */
struct layout {
	uintptr_t lo, hi;
	uintptr_t w_lo[4], w_hi[4];
	int nw;
	uintptr_t relro_lo, relro_hi;
	const ElfW(Dyn) *dyn;
};

static void layout_of(const struct dl_phdr_info *info, struct layout *L)
{
	memset(L, 0, sizeof(*L));
	L->lo = UINTPTR_MAX;
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
		switch (ph->p_type) {
		case PT_LOAD:
			if (a < L->lo)
				L->lo = a;
			if (b > L->hi)
				L->hi = b;
			if ((ph->p_flags & PF_W) && L->nw < 4) {
				L->w_lo[L->nw] = a;
				L->w_hi[L->nw++] = b;
			}
			break;
		case PT_DYNAMIC:
			L->dyn = (const ElfW(Dyn) *)a;
			break;
		case PT_GNU_RELRO:
			/* as the dynamic linker protects it: whole pages */
			L->relro_lo = a & ~(pg - 1);
			L->relro_hi = b & ~(pg - 1);
			break;
		}
	}
}

static int writable(const struct layout *L, uintptr_t a)
{
	for (int i = 0; i < L->nw; i++)
		if (a >= L->w_lo[i] && a + sizeof(uintptr_t) <= L->w_hi[i])
			return 1;
	return 0;
}

/* The dynamic linker rewrites most d_ptr values to addresses when it
 * loads an object; some (the vDSO's, read-only dynamic sections) stay
 * offsets. */
static uintptr_t dyn_ptr(const struct dl_phdr_info *info, const struct layout *L, uintptr_t v)
{
	return v >= L->lo && v < L->hi ? v : v + info->dlpi_addr;
}

/* What the dynamic section says of symbols and relocations. */
struct dyninfo {
	const ElfW(Sym) *symtab;
	const char *strtab;
	size_t strsz;
	const ElfW(Rela) *jmprel, *rela; /* PLT relocations, the others */
	size_t njmprel, nrela;
};

/* Returns 0, or -1 if the object has no symbols or relocations we read
 * (DT_REL, or an odd entry size). */
static int dyn_read(const struct dl_phdr_info *info, const struct layout *L, struct dyninfo *D)
{
	memset(D, 0, sizeof(*D));
	size_t pltsz = 0, relasz = 0, relaent = sizeof(ElfW(Rela));
	long pltrel = DT_RELA;
	for (const ElfW(Dyn) *d = L->dyn; d && d->d_tag != DT_NULL; d++) {
		switch (d->d_tag) {
		case DT_SYMTAB: D->symtab = (const ElfW(Sym) *)dyn_ptr(info, L, d->d_un.d_ptr); break;
		case DT_STRTAB: D->strtab = (const char *)dyn_ptr(info, L, d->d_un.d_ptr); break;
		case DT_STRSZ: D->strsz = d->d_un.d_val; break;
		case DT_JMPREL: D->jmprel = (const ElfW(Rela) *)dyn_ptr(info, L, d->d_un.d_ptr); break;
		case DT_PLTRELSZ: pltsz = d->d_un.d_val; break;
		case DT_PLTREL: pltrel = (long)d->d_un.d_val; break;
		case DT_RELA: D->rela = (const ElfW(Rela) *)dyn_ptr(info, L, d->d_un.d_ptr); break;
		case DT_RELASZ: relasz = d->d_un.d_val; break;
		case DT_RELAENT: relaent = d->d_un.d_val; break;
		}
	}
	if (!D->symtab || !D->strtab || relaent != sizeof(ElfW(Rela)))
		return -1;
	if (pltrel != DT_RELA)
		D->jmprel = NULL;
	D->njmprel = D->jmprel ? pltsz / sizeof(ElfW(Rela)) : 0;
	D->nrela = D->rela ? relasz / sizeof(ElfW(Rela)) : 0;
	return 0;
}

static int store(uintptr_t *where, uintptr_t v, int relro)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	void *page = (void *)((uintptr_t)where & ~(pg - 1));
	if (relro && mprotect(page, pg, PROT_READ | PROT_WRITE))
		return -1;
	__atomic_store_n(where, v, __ATOMIC_RELEASE);
	if (relro)
		mprotect(page, pg, PROT_READ);
	return 0;
}

struct apply_ctx {
	const struct got_fn *fn;
	int nfn;
	got_mask_fn mask;
	void *arg;
	int patched;
};

static void take(struct apply_ctx *c, const struct layout *L, const struct dyninfo *D, uint32_t oi,
		 const ElfW(Rela) *r, size_t n, uintptr_t base, unsigned mask)
{
	const ElfW(Sym) *symtab = D->symtab;
	const char *strtab = D->strtab;
	size_t strsz = D->strsz;
	for (size_t i = 0; i < n; i++) {
		unsigned t = ELF64_R_TYPE(r[i].r_info);
		if (t != R_X86_64_JUMP_SLOT && t != R_X86_64_GLOB_DAT)
			continue;
		const ElfW(Sym) *s = &symtab[ELF64_R_SYM(r[i].r_info)];
		if (s->st_shndx != SHN_UNDEF || !s->st_name || s->st_name >= strsz)
			continue;
		unsigned st = ELF64_ST_TYPE(s->st_info);
		if (st != STT_FUNC && st != STT_NOTYPE && st != STT_GNU_IFUNC)
			continue;
		const char *name = strtab + s->st_name;
		for (int k = 0; k < c->nfn; k++) {
			if (!(mask & (1u << k)) || strcmp(name, c->fn[k].name))
				continue;
			uintptr_t *where = (uintptr_t *)(base + r[i].r_offset);
			if (!writable(L, (uintptr_t)where))
				break;
			uintptr_t cur = __atomic_load_n(where, __ATOMIC_ACQUIRE);
			uintptr_t hook = (uintptr_t)c->fn[k].hook;
			if (cur == hook)
				break;
			if (cur != (uintptr_t)c->fn[k].real && cur != (uintptr_t)c->fn[k].alias &&
			    !(cur >= L->lo && cur < L->hi))
				break; /* someone else's */
			if (grow((void **)&slots, &capslots, nslots + 1, sizeof(*slots)))
				return;
			int relro = (uintptr_t)where >= L->relro_lo && (uintptr_t)where < L->relro_hi;
			if (store(where, hook, relro))
				break;
			slots[nslots++] = (struct slot){ where, cur, hook, oi, (uint8_t)relro };
			c->patched++;
			break;
		}
	}
}

static int apply_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct apply_ctx *c = arg;
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		seen_adds = info->dlpi_adds;
		seen_subs = info->dlpi_subs;
	}
	for (size_t i = 0; i < nobjs; i++)
		if (objs[i].addr == info->dlpi_addr && objs[i].phdr == info->dlpi_phdr)
			return 0; /* done before */
	if (grow((void **)&objs, &capobjs, nobjs + 1, sizeof(*objs)))
		return 1;
	uint32_t oi = (uint32_t)nobjs;
	objs[nobjs++] = (struct obj){ info->dlpi_addr, info->dlpi_phdr, 0, 0 };
	unsigned mask = c->mask(info, c->arg);
	struct layout L;
	layout_of(info, &L);
	if (!mask || !L.dyn || L.lo == UINTPTR_MAX)
		return 0;
	struct dyninfo D;
	if (dyn_read(info, &L, &D))
		return 0;
	take(c, &L, &D, oi, D.jmprel, D.njmprel, info->dlpi_addr, mask);
	take(c, &L, &D, oi, D.rela, D.nrela, info->dlpi_addr, mask);
	return 0;
}

static int mark_present(struct dl_phdr_info *info, size_t size, void *arg);

/* Forgets the objects unloaded since, and their slots: another object may
 * be loaded where one was. */
static void prune(void)
{
	for (size_t i = 0; i < nobjs; i++)
		objs[i].present = 0;
	dl_iterate_phdr(mark_present, NULL);
	uint32_t k = 0;
	for (size_t i = 0; i < nobjs; i++)
		objs[i].idx = objs[i].present ? k++ : UINT32_MAX;
	size_t m = 0;
	for (size_t i = 0; i < nslots; i++)
		if (objs[slots[i].obj].present) {
			slots[m] = slots[i];
			slots[m++].obj = objs[slots[i].obj].idx;
		}
	nslots = m;
	k = 0;
	for (size_t i = 0; i < nobjs; i++)
		if (objs[i].present)
			objs[k++] = objs[i];
	nobjs = k;
}

/* What the last got_apply asked, for got_refresh. */
static struct apply_ctx want;
static _Atomic int enabled;

static void child_after_fork(void)
{
	pthread_mutex_init(&lock, NULL);
}

static void once_init(void)
{
	pthread_atfork(NULL, NULL, child_after_fork);
}

static int apply_locked(void)
{
	want.patched = 0;
	if (nobjs && got_loaded_since())
		prune();
	dl_iterate_phdr(apply_one, &want);
	return want.patched;
}

int got_apply(const struct got_fn *fn, int nfn, got_mask_fn mask, void *arg)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, once_init);
	pthread_mutex_lock(&lock);
	want = (struct apply_ctx){ fn, nfn, mask, arg, 0 };
	enabled = 1;
	int n = apply_locked();
	pthread_mutex_unlock(&lock);
	return n;
}

int got_enabled(void)
{
	return atomic_load_explicit(&enabled, memory_order_relaxed);
}

int got_refresh(void)
{
	int n = 0;
	pthread_mutex_lock(&lock);
	if (enabled)
		n = apply_locked();
	pthread_mutex_unlock(&lock);
	return n;
}

static int mark_present(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	for (size_t i = 0; i < nobjs; i++)
		if (objs[i].addr == info->dlpi_addr && objs[i].phdr == info->dlpi_phdr)
			objs[i].present = 1;
	return 0;
}

int got_restore(void)
{
	int n = 0;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nobjs; i++)
		objs[i].present = 0;
	/* Held across the writes: an object cannot be unloaded under us. */
	dl_iterate_phdr(mark_present, NULL);
	for (size_t i = nslots; i-- > 0;) {
		struct slot *s = &slots[i];
		if (!objs[s->obj].present || __atomic_load_n(s->where, __ATOMIC_ACQUIRE) != s->hook)
			continue;
		if (store(s->where, s->old, s->relro) == 0)
			n++;
	}
	nslots = nobjs = 0;
	seen_adds = seen_subs = ~0ull;
	enabled = 0;
	pthread_mutex_unlock(&lock);
	return n;
}

static int first_only(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *v = arg;
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
		v[0] = info->dlpi_adds;
		v[1] = info->dlpi_subs;
	}
	return 1;
}

int got_loaded_since(void)
{
	unsigned long long v[2] = { 0, 0 };
	dl_iterate_phdr(first_only, v);
	return v[0] != __atomic_load_n(&seen_adds, __ATOMIC_RELAXED) ||
	       v[1] != __atomic_load_n(&seen_subs, __ATOMIC_RELAXED);
}

int got_contains(const struct dl_phdr_info *info, const void *addr)
{
	uintptr_t a = (uintptr_t)addr;
	if (!a)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && a >= lo && a < lo + ph->p_memsz)
			return 1;
	}
	return 0;
}

struct bound_ctx {
	const void *in;
	const char *name;
	void *found;
};

/* The value of the object's slot of `type` for `name`, if bound. */
static int bound_in(const struct dl_phdr_info *info, const struct layout *L, const struct dyninfo *D,
		    const ElfW(Rela) *r, size_t n, unsigned type, struct bound_ctx *b)
{
	for (size_t i = 0; r && i < n; i++) {
		const ElfW(Sym) *s = &D->symtab[ELF64_R_SYM(r[i].r_info)];
		if (ELF64_R_TYPE(r[i].r_info) != type || s->st_name >= D->strsz || strcmp(D->strtab + s->st_name, b->name))
			continue;
		uintptr_t v = *(const uintptr_t *)(info->dlpi_addr + r[i].r_offset);
		if (!(v >= L->lo && v < L->hi)) /* bound, not a lazy stub */
			b->found = (void *)v;
		return 1;
	}
	return 0;
}

static int bound_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct bound_ctx *b = arg;
	if (!got_contains(info, b->in))
		return 0;
	struct layout L;
	layout_of(info, &L);
	struct dyninfo D;
	if (dyn_read(info, &L, &D))
		return 1;
	/* The call's own slot; the linker may have calls go through the
	 * address's slot (GLOB_DAT) when the object takes it too. */
	if (!bound_in(info, &L, &D, D.jmprel, D.njmprel, R_X86_64_JUMP_SLOT, b))
		bound_in(info, &L, &D, D.rela, D.nrela, R_X86_64_GLOB_DAT, b);
	return 1;
}

void *got_bound(const void *in, const char *name)
{
	struct bound_ctx b = { in, name, NULL };
	dl_iterate_phdr(bound_one, &b);
	return b.found;
}
