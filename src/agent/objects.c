/*
 * objects.c — allocation sampling in the profiled process (--objects):
 * CPython's allocator hooks (and libc's), the frees of sampled blocks,
 * and when the hooks go in and out. The sample point (byte-based Poisson
 * sampling, the capture, entering a block into the table of sampled
 * blocks) is objects-sample.c; objects-internal.h is what they share.
 *
 * Hooks: PyMem_SetAllocator on the three domains (RAW, MEM, OBJ), which
 * every CPython 3.8+ has; each hook calls the allocator it replaced. They
 * go in with the GIL held once the interpreter runs (an audit hook sees
 * the first event from a running interpreter: the main module's start),
 * and come out when sampling stops: the first sample point after a stop,
 * on a thread holding the GIL, takes them out, so a stopped agent has no
 * hook at all. Why these and not the reference tracer of 3.13+ or type
 * wedges: docs/objects.md.
 *
 * Every hook call costs a thread-local subtraction (bytes left until the
 * next sample point) and, for frees, one bit test in a filter of the
 * sampled blocks (a bit per cell of a counting filter). At a sample point
 * the thread captures its stack into its ring exactly as the sampling
 * signal does (sampler.c), without allocating, and enters the block into
 * the shared table (objects-sample.c). Reentrancy: a
 * thread busy sampling ignores its own calls; RAW calls made by the OBJ
 * and MEM allocators underneath a hooked call are not counted twice.
 */
#include <dlfcn.h>
#include <link.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "shm/agent.h"
#include "got.h"
#include "shm/objects.h"
#include "shm/shm.h"
#include "common/format.h"
#include "objects-internal.h"
#include "audit.h"
#include "pymem.h"

_Static_assert(D_RAW == PYMEM_DOMAIN_RAW, "objects-internal.h's domains are CPython's");

static pymem_get_fn get_allocator;
static pymem_set_fn set_allocator;
static pymem_alloc orig[D_N];  /* what each hook calls */
static pymem_alloc ours[D_N];
static int installed;          /* changed with the GIL held only */
/* Loaded into a running process for an attach: the CLI attaches its
 * output and starts sampling through the helper, which cannot put the
 * hooks in (that needs the GIL), and a program may raise no audit event
 * for long. So the hooks go in at load, muted until sampling first
 * starts (the first sample point after that clears this), for at most
 * AWAIT_NS: an attach left paused does not keep them. The load time. */
_Atomic uint64_t awaiting;
#define AWAIT_NS 5000000000ull

int still_awaiting(void)
{
	uint64_t t = atomic_load_explicit(&awaiting, memory_order_relaxed);
	return t && mono_ns() - t < AWAIT_NS;
}
/* agent.objtab, one load away for the free hooks (agent is reached
 * through a pointer). */
static struct objtab *tab;

TLS_IE __thread struct otls ot;

/* ---- counting, on every call (the sample point is objects-sample.c) ---- */

static inline void account(int domain, void *p, size_t n)
{
	if ((ot.left -= (int64_t)n) > 0 || ot.busy)
		return;
	take_sample(domain, p, n);
}

/* ---- frees of sampled blocks ---- */

/* Loads under the fault guard (the caller set it up). */
static int guarded_read(void *ctx, void *dst, uint64_t src, size_t n)
{
	(void)ctx;
	if (!src)
		return -1;
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return 0;
}

/* Whether the shared names hold type `type` with identity `tag`. */
static int names_has(struct objtab *t, uint64_t type, uint64_t tag)
{
	uint32_t h = objnames_home(type, tag);
	for (uint32_t i = 0; i < OBJNAMES_PROBE; i++) {
		struct objname *n = &t->names[(h + i) & (OBJNAMES_SIZE - 1)];
		uint64_t cur = atomic_load_explicit(&n->type, memory_order_acquire);
		if (!cur)
			return 0;
		if (cur == type && n->tag == tag)
			return 1;
	}
	return 0;
}

/* Adds a name (the writer reads it with the type's first use). A full
 * window drops it: the helper reads the name itself then. */
static void names_put(struct objtab *t, uint64_t type, uint64_t tag, const char *name)
{
	uint32_t h = objnames_home(type, tag);
	for (uint32_t i = 0; i < OBJNAMES_PROBE; i++) {
		struct objname *n = &t->names[(h + i) & (OBJNAMES_SIZE - 1)];
		uint64_t cur = atomic_load_explicit(&n->type, memory_order_acquire);
		if (cur == type && n->tag == tag)
			return;
		if (cur)
			continue;
		uint64_t exp = 0;
		if (!atomic_compare_exchange_strong(&n->type, &exp, OBJNAME_CLAIMED))
			continue;
		n->tag = tag;
		size_t l = strnlen(name, OBJNAME_LEN - 1);
		memcpy(n->name, name, l);
		n->name[l] = 0;
		atomic_store_explicit(&n->type, type, memory_order_release);
		return;
	}
}

static void __attribute__((noinline)) freed_slow(int domain, void *p)
{
	struct objtab *t = agent.objtab;
	if (!t || getpid() != agent.pid)
		return;
	/* Frees while the interpreter finalizes are its teardown: what it
	 * frees then was live at the end of the program, and is not marked
	 * freed; its type is read all the same, while the object is whole. */
	int running = agent_py->phase() == STRATA_PHASE_RUNNING;
	uint64_t a = (uint64_t)(uintptr_t)p;
	uint32_t h = objtab_home(a);
	for (uint32_t i = 0; i < OBJTAB_WINDOW; i++) {
		struct objent *e = &t->e[(h + i) & (OBJTAB_SIZE - 1)];
		if (e->addr != a || atomic_load_explicit(&e->state, memory_order_acquire) != OBJ_LIVE)
			continue;
		/* The object is still whole: read its type now (OBJ blocks;
		 * the GIL is held), and name it while it surely lives. The
		 * helper may be reading the same block: the first to
		 * publish wins (BUSY while the tag goes in before the type). */
		struct tslot *s = tls_slot;
		if (e->domain == D_OBJ && agent_py && agent_py->obj_type && s && !s->in_handler &&
		    atomic_load_explicit(&e->type, memory_order_relaxed) == OBJTYPE_UNKNOWN) {
			s->in_handler = 1;
			volatile uint64_t got = 0, tag = 0;
			volatile int named = 0;
			char name[OBJNAME_LEN];
			if (sigsetjmp(s->guard_jb, 0) == 0) {
				s->guard_on = 1;
				uint64_t tg = 0;
				got = agent_py->obj_type(guarded_read, NULL, a, e->size, &tg);
				tag = tg;
				if (got && !names_has(t, got, tg) && agent_py->type_name &&
				    agent_py->type_name(guarded_read, NULL, got, name, sizeof(name), &tg) == 0 && tg == tag)
					named = 1;
				s->guard_on = 0;
			}
			s->in_handler = 0;
			if (named)
				names_put(t, got, tag, name);
			uint64_t exp = OBJTYPE_UNKNOWN;
			if (atomic_compare_exchange_strong(&e->type, &exp, OBJTYPE_BUSY)) {
				e->tag = tag;
				atomic_store_explicit(&e->type, got ? got : OBJTYPE_NONE, memory_order_release);
			}
		}
		if (!running)
			return;
		e->free_ns = mono_ns();
		uint32_t exp = OBJ_LIVE;
		if (atomic_compare_exchange_strong(&e->state, &exp, OBJ_FREED))
			filter_remove(t, objfilter_slot(a));
		return;
	}
	(void)domain;
}

static inline void freed(int domain, void *p)
{
	struct objtab *t = tab;
	if (!p || !t)
		return;
	uint32_t f = objfilter_slot((uint64_t)(uintptr_t)p);
	if (atomic_load_explicit(&t->filter_bits[f >> 3], memory_order_relaxed) & (1u << (f & 7)))
		freed_slow(domain, p);
}

/* ---- the hooks, one set per domain ---- */

/* ctx is the replaced allocator's own, and the hooks ignore it, so any mix
 * of old and new fields a racing RAW caller may read is still valid.
 *
 * RAW allocations nested in an OBJ or MEM allocation belong to that call
 * (a large object is counted once): the outer hook marks its thread
 * (ot.depth) around the call. Only a request too big for pymalloc's
 * pools goes on to the RAW allocator (over 512 bytes in every CPython
 * 3.8+, plus the debug hooks' few bytes with PYTHONMALLOC=debug), so a
 * small one is counted first and handed on by a tail call, unmarked:
 * the hook most allocations see is a subtraction, a compare and a jump.
 * A free ends in a tail call too, unmarked: a RAW free under an OBJ or
 * MEM free finds the block already marked freed (or not sampled). */
#define NEST_MIN 256 /* smallest OBJ/MEM request that may reach the RAW allocator, with margin */
/* (calloc's k * n is compared without a division: k and n are each
 * below NEST_MIN first, so the product cannot wrap.) */
#define HOOKS(name, D)                                                                          \
	static void *__attribute__((noinline)) name##_malloc_slow(size_t n)                     \
	{                                                                                       \
		void *p;                                                                        \
		if (D != D_RAW && n < NEST_MIN) { /* counted: a sample point */                \
			if ((p = orig[D].malloc(orig[D].ctx, n)))                               \
				take_sample(D, p, n);                                           \
			return p;                                                               \
		}                                                                               \
		if (D == D_RAW && ot.depth)                                                     \
			return orig[D].malloc(orig[D].ctx, n);                                  \
		ot.depth += D != D_RAW;                                                         \
		p = orig[D].malloc(orig[D].ctx, n);                                             \
		ot.depth -= D != D_RAW;                                                         \
		if (p)                                                                          \
			account(D, p, n);                                                       \
		return p;                                                                       \
	}                                                                                       \
	static void *name##_malloc(void *ctx, size_t n)                                         \
	{                                                                                       \
		(void)ctx;                                                                      \
		if (D != D_RAW && n < NEST_MIN && ((ot.left -= (int64_t)n) > 0 || ot.busy))     \
			return orig[D].malloc(orig[D].ctx, n);                                  \
		return name##_malloc_slow(n);                                                   \
	}                                                                                       \
	static void *__attribute__((noinline)) name##_calloc_slow(size_t k, size_t n)           \
	{                                                                                       \
		void *p;                                                                        \
		if (D != D_RAW && k < NEST_MIN && n < NEST_MIN && k * n < NEST_MIN) {                                      \
			if ((p = orig[D].calloc(orig[D].ctx, k, n)))                            \
				take_sample(D, p, k * n);                                       \
			return p;                                                               \
		}                                                                               \
		if (D == D_RAW && ot.depth)                                                     \
			return orig[D].calloc(orig[D].ctx, k, n);                               \
		ot.depth += D != D_RAW;                                                         \
		p = orig[D].calloc(orig[D].ctx, k, n);                                          \
		ot.depth -= D != D_RAW;                                                         \
		if (p)                                                                          \
			account(D, p, k * n);                                                   \
		return p;                                                                       \
	}                                                                                       \
	static void *name##_calloc(void *ctx, size_t k, size_t n)                               \
	{                                                                                       \
		(void)ctx;                                                                      \
		if (D != D_RAW && k < NEST_MIN && n < NEST_MIN && k * n < NEST_MIN &&                                      \
		    ((ot.left -= (int64_t)(k * n)) > 0 || ot.busy))                             \
			return orig[D].calloc(orig[D].ctx, k, n);                               \
		return name##_calloc_slow(k, n);                                                \
	}                                                                                       \
	static void *name##_realloc(void *ctx, void *old, size_t n)                             \
	{                                                                                       \
		(void)ctx;                                                                      \
		if (D == D_RAW && ot.depth)                                                     \
			return orig[D].realloc(orig[D].ctx, old, n);                            \
		freed(D, old);                                                                  \
		ot.depth += D != D_RAW;                                                         \
		void *p = orig[D].realloc(orig[D].ctx, old, n);                                 \
		ot.depth -= D != D_RAW;                                                         \
		if (p)                                                                          \
			account(D, p, n);                                                       \
		return p;                                                                       \
	}                                                                                       \
	static void name##_free(void *ctx, void *p)                                             \
	{                                                                                       \
		(void)ctx;                                                                      \
		if (D != D_RAW || !ot.depth)                                                    \
			freed(D, p);                                                            \
		orig[D].free(orig[D].ctx, p);                                                   \
	}

HOOKS(raw, D_RAW)
HOOKS(mem, D_MEM)
HOOKS(obj, D_OBJ)

/* ---- libc's allocation functions, called by other objects ---- */

/* An extension's own malloc (NumPy's array data, a C library's buffers)
 * is caught in its GOT (got.c): the slots of every loaded object but the
 * allocator's, the dynamic linker's, the interpreter's (its malloc is the
 * RAW domain, seen already) and strata's are made to point here while
 * allocations are sampled, and put back when sampling stops. The hooks
 * call the functions the global scope binds (libc's, or a preloaded
 * allocator's). The cost is that of the PyMem hooks: a subtraction and a
 * jump; a free, one bit of the filter. */
static struct {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
} lc;
/* The objects whose slots are left alone, known by an address in them. */
static const void *lc_skip[5];
static const void *lc_interp; /* only its dlopen is taken */
/* Read by the dlopen stub (below). */
__attribute__((visibility("hidden"))) void *(*strata_real_dlopen)(const char *, int);

static void *__attribute__((noinline)) lc_sampled(void *p, size_t n)
{
	if (p)
		take_sample(D_LIBC, p, n);
	return p;
}

static void *__attribute__((noinline)) lc_malloc_slow(size_t n)
{
	return lc_sampled(lc.malloc(n), n);
}

static void *lc_malloc(size_t n)
{
	if ((ot.left -= (int64_t)n) > 0 || ot.busy)
		return lc.malloc(n);
	return lc_malloc_slow(n);
}

static void *__attribute__((noinline)) lc_calloc_slow(size_t k, size_t n)
{
	return lc_sampled(lc.calloc(k, n), k * n);
}

static void *lc_calloc(size_t k, size_t n)
{
	size_t b;
	if (__builtin_mul_overflow(k, n, &b) || (ot.left -= (int64_t)b) > 0 || ot.busy)
		return lc.calloc(k, n);
	return lc_calloc_slow(k, n);
}

static void *lc_realloc(void *old, size_t n)
{
	freed(D_LIBC, old);
	void *p = lc.realloc(old, n);
	if (p)
		account(D_LIBC, p, n);
	return p;
}

static void lc_free(void *p)
{
	freed(D_LIBC, p);
	lc.free(p);
}

static int lc_posix_memalign(void **pp, size_t al, size_t n)
{
	int r = lc.posix_memalign(pp, al, n);
	if (r == 0)
		account(D_LIBC, *pp, n);
	return r;
}

static void *lc_aligned_alloc(size_t al, size_t n)
{
	void *p = lc.aligned_alloc(al, n);
	if (p)
		account(D_LIBC, p, n);
	return p;
}

static void *lc_memalign(size_t al, size_t n)
{
	void *p = lc.memalign(al, n);
	if (p)
		account(D_LIBC, p, n);
	return p;
}

static void *lc_valloc(size_t n)
{
	void *p = lc.valloc(n);
	if (p)
		account(D_LIBC, p, n);
	return p;
}

/* dlopen: the objects it loads get their slots taken as it returns. The
 * dynamic linker resolves a name without a slash, and $ORIGIN, relative
 * to the object that called dlopen, so those calls reach dlopen straight
 * from the stub with the caller's return address untouched (the objects
 * they load are taken at the next import); a path is the same from
 * anywhere, and is opened here. */
__attribute__((visibility("hidden"))) int strata_dlopen_direct(const char *f)
{
	return f && strchr(f, '/') && !strchr(f, '$');
}

__attribute__((visibility("hidden"))) void *strata_dlopen_post(const char *f, int mode)
{
	void *h = strata_real_dlopen(f, mode);
	got_refresh();
	return h;
}

void *strata_dlopen_hook(const char *f, int mode) __attribute__((visibility("hidden")));
__asm__(".text\n"
	".p2align 4\n"
	".globl strata_dlopen_hook\n"
	".hidden strata_dlopen_hook\n"
	".type strata_dlopen_hook, @function\n"
	"strata_dlopen_hook:\n"
	".cfi_startproc\n"
	"push %rdi\n"
	".cfi_adjust_cfa_offset 8\n"
	"push %rsi\n"
	".cfi_adjust_cfa_offset 8\n"
	"sub $8, %rsp\n"
	".cfi_adjust_cfa_offset 8\n"
	"call strata_dlopen_direct\n"
	"add $8, %rsp\n"
	".cfi_adjust_cfa_offset -8\n"
	"pop %rsi\n"
	".cfi_adjust_cfa_offset -8\n"
	"pop %rdi\n"
	".cfi_adjust_cfa_offset -8\n"
	"test %eax, %eax\n"
	"jnz strata_dlopen_post\n"
	"jmp *strata_real_dlopen(%rip)\n"
	".cfi_endproc\n"
	".size strata_dlopen_hook, .-strata_dlopen_hook\n");

enum { LC_DLOPEN = 8, LC_N = 9 };
static struct got_fn lc_fn[LC_N];

static unsigned lc_mask(const struct dl_phdr_info *info, void *arg)
{
	(void)arg;
	if (info->dlpi_name && strstr(info->dlpi_name, "linux-vdso"))
		return 0;
	if (info->dlpi_addr && info->dlpi_addr == getauxval(AT_BASE))
		return 0; /* the dynamic linker */
	for (size_t i = 0; i < sizeof(lc_skip) / sizeof(lc_skip[0]); i++)
		if (got_contains(info, lc_skip[i]))
			return 0;
	if (got_contains(info, lc_interp))
		return 1u << LC_DLOPEN;
	return (1u << LC_N) - 1;
}

/* Calls to each of them, never made: they give the agent the JUMP_SLOTs
 * that lc_setup reads (bound at load: linked -z now). `retain` keeps the
 * function through the link's --gc-sections too, which `used` alone does
 * not: no call reaches it. */
static void *volatile lc_sink;
__attribute__((used, retain, noinline)) static void lc_refs(void)
{
	void *p;
	lc_sink = malloc(1);
	lc_sink = calloc(1, 1);
	lc_sink = realloc(lc_sink, 2);
	free(lc_sink);
	lc_sink = (void *)(intptr_t)posix_memalign(&p, 16, 16);
	lc_sink = aligned_alloc(16, 16);
	lc_sink = memalign(16, 16);
	lc_sink = valloc(16);
	lc_sink = dlopen(NULL, RTLD_LAZY);
}

static int lc_setup(void)
{
	void *f[LC_N];
	static const char *const names[LC_N] = { "malloc", "calloc", "realloc", "free", "posix_memalign",
						  "aligned_alloc", "memalign", "valloc", "dlopen" };
	void *hooks[LC_N] = { (void *)lc_malloc, (void *)lc_calloc, (void *)lc_realloc,
			      (void *)lc_free, (void *)lc_posix_memalign, (void *)lc_aligned_alloc,
			      (void *)lc_memalign, (void *)lc_valloc, (void *)strata_dlopen_hook };
	(void)lc_refs;
	/* What a shared object's call reaches: the agent's own bound slot.
	 * (dlsym would give a non-PIE executable's canonical PLT entry when
	 * it takes the function's address, which jumps through the
	 * executable's own slot.) */
	for (int i = 0; i < LC_N; i++) {
		f[i] = got_bound((const void *)lc_setup, names[i]);
		void *d = dlsym(RTLD_DEFAULT, names[i]);
		lc_fn[i] = (struct got_fn){ names[i], hooks[i], f[i], d != f[i] ? d : NULL };
	}
	for (int i = 0; i < LC_N; i++)
		if (!f[i]) {
			memset(lc_fn, 0, sizeof(lc_fn));
			return -1;
		}
	*(void **)&lc.malloc = f[0];
	*(void **)&lc.calloc = f[1];
	*(void **)&lc.realloc = f[2];
	*(void **)&lc.free = f[3];
	*(void **)&lc.posix_memalign = f[4];
	*(void **)&lc.aligned_alloc = f[5];
	*(void **)&lc.memalign = f[6];
	*(void **)&lc.valloc = f[7];
	*(void **)&strata_real_dlopen = f[8];
	lc_skip[0] = f[0];                                            /* the allocator */
	lc_skip[1] = dlsym(RTLD_DEFAULT, "gnu_get_libc_version");     /* libc, if not it */
	lc_skip[2] = (const void *)lc_setup;                          /* strata's agent */
	lc_skip[3] = (const void *)agent_py->phase;                   /* its Python module */
	lc_skip[4] = (const void *)dlsym(RTLD_DEFAULT, "_r_debug");   /* the dynamic linker */
	lc_interp = dlsym(RTLD_DEFAULT, "PyMem_RawMalloc");
	return 0;
}

static void fill(pymem_alloc *a, int d)
{
	a->ctx = orig[d].ctx;
	switch (d) {
	case D_RAW: a->malloc = raw_malloc, a->calloc = raw_calloc, a->realloc = raw_realloc, a->free = raw_free; break;
	case D_MEM: a->malloc = mem_malloc, a->calloc = mem_calloc, a->realloc = mem_realloc, a->free = mem_free; break;
	default: a->malloc = obj_malloc, a->calloc = obj_calloc, a->realloc = obj_realloc, a->free = obj_free; break;
	}
}

/* With the GIL. */
static void install_hooks(void)
{
	if (!get_allocator || !set_allocator)
		return;
	if (!installed) {
		for (int d = 0; d < D_N; d++) {
			get_allocator(d, &orig[d]);
			fill(&ours[d], d);
		}
		for (int d = 0; d < D_N; d++)
			set_allocator(d, &ours[d]);
		installed = 1;
	}
	if (lc_fn[0].name && !got_enabled())
		got_apply(lc_fn, LC_N, lc_mask, NULL);
}

/* With the GIL. When someone hooked a domain on top of ours since
 * (tracemalloc started by the program), taking ours out would take theirs
 * too: then ours stay in every domain, muted. */
void remove_hooks(void)
{
	if (!installed)
		return;
	got_restore(); /* whatever happens to the PyMem hooks */
	for (int d = 0; d < D_N; d++) {
		pymem_alloc cur;
		get_allocator(d, &cur);
		if (cur.malloc != ours[d].malloc || cur.free != ours[d].free)
			return; /* all stay, muted while sampling is off */
	}
	for (int d = 0; d < D_N; d++)
		set_allocator(d, &orig[d]);
	installed = 0;
}

void objects_sync(void)
{
	if (!agent.active || !agent.cfg.objects || getpid() != agent.pid)
		return;
	int running = !atomic_load(&agent.stopping) && agent_py->phase() == STRATA_PHASE_RUNNING;
	int want = running && atomic_load(&agent.sampling) && atomic_load(&agent.has_output) &&
		   atomic_load(&agent.layout) == LAYOUT_OK;
	/* Loaded for an attach that has not started sampling yet. */
	int early = running && still_awaiting() && atomic_load(&agent.layout) != LAYOUT_BAD;
	if (want || early)
		install_hooks();
	else if (running)
		remove_hooks();
}

/* Called with the GIL held on every audit event: the first one from a
 * running interpreter puts the hooks in, and so does the first after a
 * `strata ctl start`. A load and a branch otherwise. */
static int objects_audit(const char *event, void *args, void *data)
{
	(void)args;
	(void)data;
	audit_event(event);
	if (!agent.active || !agent.cfg.objects)
		return 0;
	if (atomic_load_explicit(&agent.sampling, memory_order_relaxed) &&
	    (!installed || (lc_fn[0].name && !got_enabled())))
		objects_sync();
	/* Objects that a dlopen without a path loaded (the stub left those
	 * calls alone): taken before the import that may use them. */
	else if (installed && event[0] == 'i' && !strcmp(event, "import") && got_loaded_since())
		got_refresh();
	return 0;
}

int objects_fresh(void)
{
	agent.objtab = shm_alloc(sizeof(struct objtab));
	tab = agent.objtab;
	return agent.objtab ? 0 : -1;
}

static int (*gil_check)(void);

/* Whether this thread holds the GIL (an agent loaded into a running
 * process: by the Python module, a PEP 768 script, or a thread that
 * ptrace borrowed while it ran bytecode). */
static int gil_held(void)
{
	return gil_check && gil_check();
}

/* Loaded into a running interpreter, run by its main thread with the GIL
 * (Py_AddPendingCall) when the thread that loaded the agent did not hold
 * it: the audit hook, and the hooks if sampling is on. */
static int late_setup(void *arg)
{
	(void)arg;
	if (audit_add(objects_audit, NULL) == 0)
		objects_sync();
	return 0;
}

int objects_setup(void)
{
	*(void **)&get_allocator = dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
	*(void **)&set_allocator = dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
	*(void **)&gil_check = dlsym(RTLD_DEFAULT, "PyGILState_Check");
	int (*pending)(int (*)(void *), void *);
	*(void **)&pending = dlsym(RTLD_DEFAULT, "Py_AddPendingCall");
	if (!get_allocator || !set_allocator || !dlsym(RTLD_DEFAULT, "PySys_AddAuditHook") || !agent_py->obj_type || !agent_py->type_name)
		return -1;
	if (!agent.objtab && objects_fresh())
		return -1;
	sample_alloc_init();
	if (lc_setup())
		agent_log("libc's allocation functions were not found: --objects sees CPython's allocators only");
	/* Preloaded: before Py_Initialize (the audit hook then waits for the
	 * interpreter to run). Loaded into a running one: with the GIL, now
	 * (objects_loaded puts the hooks in), or from the main thread's next
	 * pending call: PySys_AddAuditHook runs the program's audit hooks,
	 * which need it. */
	atomic_store(&awaiting, agent.by_tid && agent.standby ? mono_ns() : 0);
	if (!agent.by_tid || gil_held())
		return audit_add(objects_audit, NULL) == 0 ? 0 : -1;
	return pending && pending(late_setup, NULL) == 0 ? 0 : -1;
}

void objects_loaded(void)
{
	if (gil_held())
		objects_sync();
}
