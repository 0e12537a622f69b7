/*
 * jit-poll.c — the helper finds JIT-compiled code (issue 5): discovery
 * through the GDB JIT interface, the profile records for it, listeners
 * (jit.h), and the ranges the signal handler consults (jit.c).
 *
 * Discovery. LLVM (so Numba through llvmlite) registers each object it
 * compiles by linking a `jit_code_entry` into `__jit_debug_descriptor` and
 * calling `__jit_debug_register_code`, a no-op debuggers break on. That
 * call is made inside libLLVM (Debian: libLLVM-14.so.1; PyPI's llvmlite
 * links LLVM statically), bound at link time, so it cannot be interposed.
 * Instead the helper polls: every pass (10 ms) it reads the descriptor of
 * each LLVM copy loaded in the target (found in the symbol tables of the
 * objects whose name says LLVM, and of the executable, again whenever the
 * target's link map changes; where a stripped LLVM names none, the places
 * it can be are watched until one is seen in use: jit-find.h). The
 * descriptor changes on every registration
 * and unregistration (relevant_entry, action_flag, and first_entry on
 * registration), so a pass with no change costs one read; after a change
 * the list is walked with checked reads (LLVM may be editing it in another
 * thread: a walk that meets anything odd, or a descriptor that changed
 * during the walk, is simply redone next pass) and compared with the
 * images known: new ones are copied, recorded and announced to listeners,
 * vanished ones unloaded. Code cannot run before it is registered, and the
 * writer polls before draining the sample rings, so every sample in JIT
 * code is written after its image's record.
 */
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shm/agent.h"
#include "jit.h"
#include "jit-find.h"
#include "remote.h"
#include "shm/unwind.h"
#include "common/elfsect.h"
#include "common/format.h"
#include "target.h"

#define MAX_DESCRIPTORS 8
#define MAX_PENDING 64            /* candidate descriptors (jit-find.h) */
#define MAX_EXAMINED 64           /* objects looked at for candidates */
#define MAX_LISTENERS 4
#define MAX_WALK 100000           /* entries in one list: anything longer is a loop */

struct jimg {
	struct jimg *next;
	uint64_t id;
	uint64_t entry, symfile, size; /* identity: where it is registered */
	uint8_t *elf;
	uint64_t start, end;
	uint64_t time_ns;
	uint64_t eh_addr, eh_len;      /* its loaded .eh_frame (relocated), 0 if none */
	uint32_t nranges;
	uint64_t (*ranges)[2];
	uint32_t nfuncs;
	uint64_t (*funcs)[2];          /* its functions (symbol table), sorted, disjoint */
	uint32_t desc;                 /* index of the descriptor that lists it */
	int seen;                      /* found by the current walk */
	int announced;                 /* REC_JIT_IMAGE written in the current stream */
};

struct jit_state {
	pthread_mutex_t lock;
	uint64_t desc[MAX_DESCRIPTORS];
	struct gdb_jit_descriptor last[MAX_DESCRIPTORS];
	int dirty[MAX_DESCRIPTORS];
	uint32_t ndesc;
	unsigned long long adds;
	int scanned;
	jit_listener listeners[MAX_LISTENERS];
	uint32_t nlisteners;
	struct jimg *imgs;
	uint64_t next_id;
	uint64_t images_total;
	int warned_full;

	uint64_t gen;                  /* the target's link map when last searched */

	/* LLVM copies that do not name their descriptor (jit-find.h): the
	 * places it can be, until one is seen in use. An object is
	 * examined once (by its dynamic section and bias). */
	struct {
		uint64_t addr, ld;
		struct gdb_jit_descriptor last;
	} pending[MAX_PENDING];
	uint32_t npending;
	uint64_t examined[MAX_EXAMINED][2];
	uint32_t nexamined;
};

static void jit_init(struct jit_state *s)
{
	pthread_mutex_init(&s->lock, NULL);
	s->next_id = 1;
}

TARGET_STATE(struct jit_state, jit, jit_init)
#define J (*jit_of(agentd_target))

/* The handler's view, in the shared region. */
#define H (agent.jit)

/* ---- publishing ranges --------------------------------------------------------- */

static int cmp_range(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void publish(void)
{
	/* The writer's thread, or the link's finishing a target: each its
	 * own (64 KB, at its first use). */
	static __thread uint64_t (*tmp)[2];
	if (!tmp && !(tmp = malloc(sizeof(uint64_t[JIT_MAX_RANGES][2]))))
		return;
	uint32_t n = 0;
	int full = 0;
	for (struct jimg *g = J.imgs; g; g = g->next)
		for (uint32_t i = 0; i < g->nranges; i++) {
			if (n == JIT_MAX_RANGES) {
				full = 1;
				break;
			}
			tmp[n][0] = g->ranges[i][0];
			tmp[n][1] = g->ranges[i][1];
			n++;
		}
	if (full && !J.warned_full) {
		J.warned_full = 1;
		agent_log("more than %d JIT code ranges; samples in the newest are not attributed", JIT_MAX_RANGES);
	}
	qsort(tmp, n, sizeof(tmp[0]), cmp_range);
	uint32_t s = atomic_load_explicit(&H.seq, memory_order_relaxed);
	atomic_store_explicit(&H.seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (uint32_t i = 0; i < n; i++) {
		atomic_store_explicit(&H.lo[i], tmp[i][0], memory_order_relaxed);
		atomic_store_explicit(&H.hi[i], tmp[i][1], memory_order_relaxed);
	}
	atomic_store_explicit(&H.n, n, memory_order_relaxed);
	atomic_store_explicit(&H.seq, s + 2, memory_order_release);
}

/* ---- finding descriptors ------------------------------------------------------ */

static void add_desc(uint64_t addr)
{
	if (!addr)
		return;
	for (uint32_t i = 0; i < J.ndesc; i++)
		if (J.desc[i] == addr)
			return;
	if (J.ndesc == MAX_DESCRIPTORS)
		return;
	J.desc[J.ndesc] = addr;
	memset(&J.last[J.ndesc], 0, sizeof(J.last[0]));
	J.dirty[J.ndesc] = 1;
	J.ndesc++;
}

/* An LLVM inside a stripped object (Debian sid's libllvmlite.so): the
 * places its descriptor can be, watched by take_pending(). */
static void add_candidates(const struct robj *o)
{
	for (uint32_t i = 0; i < J.nexamined; i++)
		if (J.examined[i][0] == o->ld && J.examined[i][1] == o->bias)
			return;
	if (J.nexamined == MAX_EXAMINED)
		return;
	J.examined[J.nexamined][0] = o->ld;
	J.examined[J.nexamined][1] = o->bias;
	J.nexamined++;
	uint64_t c[JIT_DESC_MAX_CANDIDATES];
	int n = jit_desc_candidates(o->path, c, JIT_DESC_MAX_CANDIDATES);
	if (n < 0)
		agent_log("%s has no __jit_debug_descriptor symbol and strata cannot tell where it is: "
			  "JIT code compiled by it is not found", o->path);
	for (int i = 0; i < n && J.npending < MAX_PENDING; i++) {
		J.pending[J.npending].addr = o->bias + c[i];
		J.pending[J.npending].ld = o->ld;
		memset(&J.pending[J.npending].last, 0, sizeof(J.pending[0].last));
		J.npending++;
	}
}

/* Takes a candidate that is seen in use as its object's descriptor (and
 * forgets the object's other candidates). A candidate is verified again
 * only when its bytes changed. */
static void take_pending(void)
{
	for (uint32_t i = 0; i < J.npending; i++) {
		struct gdb_jit_descriptor now;
		if (remote_read(&now, J.pending[i].addr, sizeof(now)) || !memcmp(&now, &J.pending[i].last, sizeof(now)))
			continue;
		J.pending[i].last = now;
		if (!jit_desc_verify(J.pending[i].addr))
			continue;
		add_desc(J.pending[i].addr);
		uint64_t ld = J.pending[i].ld;
		uint32_t m = 0;
		for (uint32_t k = 0; k < J.npending; k++)
			if (J.pending[k].ld != ld)
				J.pending[m++] = J.pending[k];
		J.npending = m;
		i = (uint32_t)-1; /* the array moved: start over */
	}
}

static int scan_cb(const struct robj *o, void *arg)
{
	(void)arg;
	/* The interpreter's own code (the executable, or libpython): loaded
	 * before anything else, noted at the first scan. */
	if (!J.scanned && (o->is_main || strstr(o->path, "libpython"))) {
		uint32_t ni = atomic_load(&H.ninterp);
		for (uint32_t i = 0; i < o->nph && ni < 4; i++) {
			const struct rseg *ph = &o->ph[i];
			if (ph->type == PT_LOAD && (ph->flags & PF_X)) {
				H.interp_lo[ni] = o->bias + ph->vaddr;
				H.interp_hi[ni] = o->bias + ph->vaddr + ph->memsz;
				ni++;
			}
		}
		atomic_store_explicit(&H.ninterp, ni, memory_order_release);
	}
	/* An LLVM inside the object (Debian's libLLVM, or PyPI's llvmlite
	 * with LLVM linked in and the descriptor kept local), or in the
	 * executable itself. */
	if (o->is_main || strstr(o->path, "llvm") || strstr(o->path, "LLVM")) {
		uint64_t v = elf_symbol(o->path, "__jit_debug_descriptor", NULL);
		if (v)
			add_desc(o->bias + v);
		else if (!o->is_main && !o->is_vdso)
			add_candidates(o);
	}
	return 0;
}

/* Looks for descriptors in every loaded object, when the target's link map
 * changed since the last look. */
static void find_descriptors(void)
{
	uint64_t gen = remote_objects_gen();
	if (J.scanned && gen == J.gen)
		return;
	if (!J.scanned)
		atomic_store(&H.ninterp, 0);
	if (remote_objects(scan_cb, NULL) == 0) {
		J.scanned = 1;
		J.gen = gen;
	}
}

/* ---- images ------------------------------------------------------------------ */

/* The executable sections' run-time ranges and the loaded .eh_frame of an
 * image, from its section headers. Returns 0, or -1 if it is no ELF we
 * can use. */
static int func_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* The image's functions from its symbol table: where each runs (its
 * section's load address plus the symbol's offset, as in jitsym.c), for
 * unwind rules derived from code that has no CFI (cfi-synth.h). */
static void image_funcs(struct jimg *g, const uint8_t *e, size_t len, const Elf64_Ehdr *eh)
{
	for (uint32_t i = 0; i < eh->e_shnum && !g->funcs; i++) {
		Elf64_Shdr s;
		memcpy(&s, e + eh->e_shoff + (size_t)i * sizeof(s), sizeof(s));
		if (s.sh_type != SHT_SYMTAB || s.sh_offset > len || s.sh_size > len - s.sh_offset)
			continue;
		size_t n = s.sh_size / sizeof(Elf64_Sym);
		g->funcs = calloc(n ? n : 1, sizeof(g->funcs[0]));
		if (!g->funcs)
			return;
		for (size_t k = 0; k < n; k++) {
			Elf64_Sym y;
			memcpy(&y, e + s.sh_offset + k * sizeof(y), sizeof(y));
			if (ELF64_ST_TYPE(y.st_info) != STT_FUNC || !y.st_size || !y.st_shndx || y.st_shndx >= eh->e_shnum)
				continue;
			Elf64_Shdr t;
			memcpy(&t, e + eh->e_shoff + (size_t)y.st_shndx * sizeof(t), sizeof(t));
			/* Inside its section, which does not wrap around the
			 * address space: [start, end) is never empty or
			 * reversed (the unwinder derives rules over it). */
			if (!(t.sh_flags & SHF_EXECINSTR) || !t.sh_addr || t.sh_addr + t.sh_size < t.sh_addr ||
			    y.st_value > t.sh_size || y.st_size > t.sh_size - y.st_value)
				continue;
			g->funcs[g->nfuncs][0] = t.sh_addr + y.st_value;
			g->funcs[g->nfuncs][1] = t.sh_addr + y.st_value + y.st_size;
			g->nfuncs++;
		}
	}
	if (!g->nfuncs)
		return;
	qsort(g->funcs, g->nfuncs, sizeof(g->funcs[0]), func_cmp);
	uint32_t m = 0;
	for (uint32_t i = 0; i < g->nfuncs; i++)
		if (!m || g->funcs[i][0] >= g->funcs[m - 1][1]) {
			g->funcs[m][0] = g->funcs[i][0];
			g->funcs[m][1] = g->funcs[i][1];
			m++;
		}
	g->nfuncs = m;
}

static int parse_image(struct jimg *g, const uint8_t *e, size_t len)
{
	if (len < sizeof(Elf64_Ehdr) || memcmp(e, ELFMAG, SELFMAG) || e[EI_CLASS] != ELFCLASS64)
		return -1;
	Elf64_Ehdr eh;
	memcpy(&eh, e, sizeof(eh));
	if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > len ||
	    (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr) > len - eh.e_shoff)
		return -1;
	const uint8_t *names = NULL;
	size_t names_len = 0;
	if (eh.e_shstrndx < eh.e_shnum) {
		Elf64_Shdr s;
		memcpy(&s, e + eh.e_shoff + (size_t)eh.e_shstrndx * sizeof(s), sizeof(s));
		if (s.sh_offset <= len && s.sh_size <= len - s.sh_offset) {
			names = e + s.sh_offset;
			names_len = s.sh_size;
		}
	}
	g->start = UINT64_MAX;
	g->end = 0;
	g->ranges = calloc(eh.e_shnum ? eh.e_shnum : 1, sizeof(g->ranges[0]));
	if (!g->ranges)
		return -1;
	for (uint32_t i = 0; i < eh.e_shnum; i++) {
		Elf64_Shdr s;
		memcpy(&s, e + eh.e_shoff + (size_t)i * sizeof(s), sizeof(s));
		if (!s.sh_addr || !s.sh_size || s.sh_addr + s.sh_size < s.sh_addr)
			continue;
		if ((s.sh_flags & SHF_ALLOC) && (s.sh_flags & SHF_EXECINSTR)) {
			g->ranges[g->nranges][0] = s.sh_addr;
			g->ranges[g->nranges][1] = s.sh_addr + s.sh_size;
			g->nranges++;
			if (s.sh_addr < g->start)
				g->start = s.sh_addr;
			if (s.sh_addr + s.sh_size > g->end)
				g->end = s.sh_addr + s.sh_size;
		}
		if (names && s.sh_name < names_len && !strncmp((const char *)names + s.sh_name, ".eh_frame",
								  names_len - s.sh_name)) {
			g->eh_addr = s.sh_addr;
			g->eh_len = s.sh_size;
		}
	}
	if (!g->nranges) {
		g->start = g->end = 0;
	}
	image_funcs(g, e, len, &eh);
	return 0;
}

static void img_free(struct jimg *g)
{
	free(g->elf);
	free(g->ranges);
	free(g->funcs);
	free(g);
}

static void notify(struct jimg *g, int registered)
{
	struct jit_image ji = { g->id, g->elf, (size_t)g->size };
	for (uint32_t i = 0; i < J.nlisteners; i++)
		J.listeners[i](&ji, registered);
}

static void put_image(struct jimg *g, struct wbuf *recs)
{
	if (!recs || g->announced)
		return;
	struct rec_jit_image r = {
		.id = g->id, .start = g->start, .end = g->end, .time_ns = g->time_ns,
		.image = g->elf, .image_len = (size_t)g->size,
	};
	rec_put_jit_image(recs, &r);
	g->announced = 1;
}

static struct jimg *find_img(uint64_t entry, uint64_t symfile, uint64_t size)
{
	for (struct jimg *g = J.imgs; g; g = g->next)
		if (g->entry == entry && g->symfile == symfile && g->size == size)
			return g;
	return NULL;
}

/* Walks one descriptor's list, marking known images seen and adding new
 * ones. Returns 0 when the walk was clean, -1 to retry next pass. */
static int walk(uint32_t di, struct gdb_jit_descriptor *d, int *changed, struct wbuf *recs)
{
	uint64_t e = d->first_entry, prev = 0;
	uint32_t steps = 0;
	while (e) {
		struct gdb_jit_entry ent;
		/* Each entry points back at the one before it (the first at
		 * none): a list that loops, or one LLVM is editing now, is
		 * left after one lap, not walked MAX_WALK times. */
		if (++steps > MAX_WALK || remote_read(&ent, e, sizeof(ent)) || ent.prev != prev)
			return -1;
		struct jimg *g = find_img(e, ent.symfile_addr, ent.symfile_size);
		unsigned char id[EI_NIDENT];
		if (g) {
			g->seen = 1;
		} else if (ent.symfile_size >= sizeof(Elf64_Ehdr) && ent.symfile_size <= JIT_MAX_IMAGE &&
			   !remote_read(id, ent.symfile_addr, sizeof(id)) && !memcmp(id, ELFMAG, SELFMAG)) {
			/* An ELF image, by its first bytes, before its size
			 * (up to JIT_MAX_IMAGE) is allocated and copied. */
			g = calloc(1, sizeof(*g));
			uint8_t *elf = g ? malloc(ent.symfile_size) : NULL;
			if (!elf || remote_read(elf, ent.symfile_addr, ent.symfile_size) ||
			    parse_image(g, elf, ent.symfile_size)) {
				free(elf);
				if (g)
					img_free(g);
				/* Unreadable or not ELF: being torn down, or
				 * not ours to read. Skip it, do not retry. */
			} else {
				g->elf = elf;
				g->entry = e;
				g->symfile = ent.symfile_addr;
				g->size = ent.symfile_size;
				g->id = J.next_id++;
				g->time_ns = mono_ns();
				g->seen = 1;
				g->desc = di;
				g->next = J.imgs;
				J.imgs = g;
				J.images_total++;
				*changed = 1;
				put_image(g, recs);
				if (agent.cfg.native)
					unwind_jit_add(g->id, (const uint64_t(*)[2])g->ranges, g->nranges, g->eh_addr, g->eh_len,
						       (const uint64_t(*)[2])g->funcs, g->nfuncs);
				notify(g, 1);
			}
		}
		prev = e;
		e = ent.next;
	}
	return 0;
}

void jit_poll(struct wbuf *recs)
{
	pthread_mutex_lock(&J.lock);
	find_descriptors();
	if (J.npending)
		take_pending();
	int changed = 0;
	for (uint32_t i = 0; i < J.ndesc; i++) {
		struct gdb_jit_descriptor now;
		if (remote_read(&now, J.desc[i], sizeof(now)))
			continue;
		if (!J.dirty[i] && !memcmp(&now, &J.last[i], sizeof(now)))
			continue;
		for (struct jimg *g = J.imgs; g; g = g->next)
			if (g->desc == i)
				g->seen = 0;
		int bad = walk(i, &now, &changed, recs);
		struct gdb_jit_descriptor after;
		if (!bad && !remote_read(&after, J.desc[i], sizeof(after)) &&
		    !memcmp(&now, &after, sizeof(now))) {
			J.last[i] = now;
			J.dirty[i] = 0;
			/* A clean walk of a list that did not change meanwhile:
			 * what it did not see is gone. */
			{
				struct jimg **pp = &J.imgs;
				while (*pp) {
					struct jimg *g = *pp;
					if (g->seen || g->desc != i) {
						pp = &g->next;
						continue;
					}
					*pp = g->next;
					if (recs && g->announced) {
						struct rec_jit_unload u = { g->id, mono_ns() };
						rec_put_jit_unload(recs, &u);
					}
					if (agent.cfg.native)
						unwind_jit_remove(g->id);
					notify(g, 0);
					img_free(g);
					changed = 1;
				}
			}
		} else {
			J.dirty[i] = 1;
		}
	}
	/* Images found while there was no output (standby, detached) are
	 * announced once there is one. */
	for (struct jimg *g = J.imgs; g && recs; g = g->next)
		put_image(g, recs);
	if (changed)
		publish();
	pthread_mutex_unlock(&J.lock);
}

void jit_stream_reset(void)
{
	pthread_mutex_lock(&J.lock);
	for (struct jimg *g = J.imgs; g; g = g->next)
		g->announced = 0;
	pthread_mutex_unlock(&J.lock);
}

int jit_add_listener(jit_listener fn)
{
	pthread_mutex_lock(&J.lock);
	if (J.nlisteners == MAX_LISTENERS) {
		pthread_mutex_unlock(&J.lock);
		return -1;
	}
	J.listeners[J.nlisteners++] = fn;
	for (struct jimg *g = J.imgs; g; g = g->next) {
		struct jit_image ji = { g->id, g->elf, (size_t)g->size };
		fn(&ji, 1);
	}
	pthread_mutex_unlock(&J.lock);
	return 0;
}

uint64_t jit_images_seen(void)
{
	return J.images_total;
}
