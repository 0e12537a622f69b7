/*
 * jit.c — JIT-compiled code (issue 5): discovery through the GDB JIT
 * interface, the profile records for it, listeners (jit.h), and the
 * signal-safe table of JIT code ranges the sample handler consults.
 *
 * Discovery. LLVM (so Numba through llvmlite) registers each object it
 * compiles by linking a `jit_code_entry` into `__jit_debug_descriptor` and
 * calling `__jit_debug_register_code`, a no-op debuggers break on. That
 * call is made inside libLLVM (Debian: libLLVM-14.so.1; PyPI's llvmlite
 * links LLVM statically), bound at link time, so it cannot be interposed.
 * Instead the writer polls: every pass (10 ms) it reads the descriptor of
 * each LLVM copy loaded (found with dlsym on every loaded object, redone
 * when dl_iterate_phdr says objects were added). The descriptor changes on
 * every registration and unregistration (relevant_entry, action_flag, and
 * first_entry on registration), so a pass with no change costs three
 * loads; after a change the list is walked with fault-proof reads (LLVM
 * may be editing it in another thread: a walk that meets anything odd, or
 * a descriptor that changed during the walk, is simply redone next pass)
 * and compared with the images known: new ones are copied, recorded and
 * announced to listeners, vanished ones unloaded. Code cannot run before it
 * is registered, and the writer polls before draining the sample rings, so
 * every sample in JIT code is written after its image's record.
 *
 * The handler side (jit_leaf_capture) is a seqlock-published array of
 * executable ranges: the writer edits a fixed static table between two
 * increments of a sequence number, the handler retries a bounded number of
 * times when it sees an edit in progress. No allocation, no lock, no free:
 * nothing the handler reads can go away.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "agent.h"
#include "jit.h"
#include "unwind.h"
#include "../common/elfsect.h"
#include "../common/format.h"

/* The GDB JIT interface (gdb/doc/gdb.texinfo, "JIT Interface"). */
struct gdb_jit_entry {
	uint64_t next, prev;
	uint64_t symfile_addr;
	uint64_t symfile_size;
};
struct gdb_jit_descriptor {
	uint32_t version;
	uint32_t action_flag;
	uint64_t relevant_entry;
	uint64_t first_entry;
};

#define MAX_DESCRIPTORS 8
#define MAX_LISTENERS 4
#define MAX_WALK 100000           /* entries in one list: anything longer is a loop */
#define MAX_IMAGE (32u << 20)     /* bytes: a record must fit a chunk */
#define JIT_MAX_RANGES 4096

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
	uint32_t desc;                 /* index of the descriptor that lists it */
	int seen;                      /* found by the current walk */
	int announced;                 /* REC_JIT_IMAGE written in the current stream */
};

static struct {
	pthread_mutex_t lock;
	struct gdb_jit_descriptor *desc[MAX_DESCRIPTORS];
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

	/* The handler's view. */
	_Atomic uint32_t seq;
	_Atomic uint32_t n;
	_Atomic uint64_t lo[JIT_MAX_RANGES], hi[JIT_MAX_RANGES];
	/* The interpreter's own code: a pc there is never JIT's callee. */
	uint64_t interp_lo[4], interp_hi[4];
	uint32_t ninterp;
} J = { .lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1 };

/* ---- the handler side ------------------------------------------------------ */

/* Whether pc is in JIT code. Async-signal-safe: loads and a bounded retry. */
static int in_jit(uint64_t pc)
{
	for (int tries = 0; tries < 4; tries++) {
		uint32_t s0 = atomic_load_explicit(&J.seq, memory_order_acquire);
		if (s0 & 1)
			continue;
		uint32_t n = atomic_load_explicit(&J.n, memory_order_relaxed);
		if (n > JIT_MAX_RANGES)
			n = JIT_MAX_RANGES;
		uint32_t lo = 0, hi = n;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (atomic_load_explicit(&J.lo[mid], memory_order_relaxed) <= pc)
				lo = mid + 1;
			else
				hi = mid;
		}
		int hit = lo > 0 && pc < atomic_load_explicit(&J.hi[lo - 1], memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&J.seq, memory_order_relaxed) == s0)
			return hit;
	}
	return 0;
}

int jit_active(void)
{
	return atomic_load_explicit(&J.n, memory_order_relaxed) != 0;
}

/* Whether the bytes before `ra` are a call instruction: a stale word on the
 * stack that happens to point into JIT code rarely is. */
static int after_call(uint64_t ra)
{
	const volatile uint8_t *p = (const volatile uint8_t *)(uintptr_t)ra;
	if (p[-5] == 0xe8)                                /* call rel32 */
		return 1;
	if (p[-2] == 0xff && (p[-1] & 0xf8) == 0xd0)      /* call *%reg */
		return 1;
	if (p[-6] == 0xff && p[-5] == 0x15)               /* call *rel32(%rip) */
		return 1;
	if (p[-3] == 0x41 && p[-2] == 0xff && (p[-1] & 0xf8) == 0xd0) /* call *%r8-15 */
		return 1;
	return 0;
}

int jit_leaf_capture(const void *ucv, uint64_t *out, uint8_t *flags)
{
	const ucontext_t *uc = ucv;
	uint64_t pc = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	if (in_jit(pc)) {
		out[0] = pc;
		*flags |= STACK_JIT_LEAF;
		return 1;
	}
	/* JIT code calls out (libm's sin and exp, Numba's runtime): the
	 * return address into it is a few words up the stack. The
	 * interpreter itself is not such a callee; elsewhere the first word
	 * that points into JIT code just after a call instruction is taken. */
	for (uint32_t i = 0; i < J.ninterp; i++)
		if (pc >= J.interp_lo[i] && pc < J.interp_hi[i])
			return 0;
	uint64_t sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
	for (int k = 0; k < 48; k++) {
		uint64_t w = *(const volatile uint64_t *)(uintptr_t)(sp + 8u * (uint64_t)k);
		if (in_jit(w - 1) && after_call(w)) {
			out[0] = w;
			*flags |= STACK_JIT_LEAF | STACK_JIT_RETURN;
			return 1;
		}
	}
	return 0;
}

/* ---- publishing ranges (writer) -------------------------------------------- */

static int cmp_range(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

static void publish(void)
{
	static uint64_t tmp[JIT_MAX_RANGES][2];
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
	uint32_t s = atomic_load_explicit(&J.seq, memory_order_relaxed);
	atomic_store_explicit(&J.seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (uint32_t i = 0; i < n; i++) {
		atomic_store_explicit(&J.lo[i], tmp[i][0], memory_order_relaxed);
		atomic_store_explicit(&J.hi[i], tmp[i][1], memory_order_relaxed);
	}
	atomic_store_explicit(&J.n, n, memory_order_relaxed);
	atomic_store_explicit(&J.seq, s + 2, memory_order_release);
}

/* ---- finding descriptors ------------------------------------------------------ */

static void add_desc(void *sym)
{
	if (!sym)
		return;
	for (uint32_t i = 0; i < J.ndesc; i++)
		if (J.desc[i] == sym)
			return;
	if (J.ndesc == MAX_DESCRIPTORS)
		return;
	J.desc[J.ndesc] = sym;
	memset(&J.last[J.ndesc], 0, sizeof(J.last[0]));
	J.dirty[J.ndesc] = 1;
	J.ndesc++;
}

struct scan_ctx {
	char names[256][512];
	uint64_t bias[256];
	uint32_t n;
	unsigned long long adds;
};

static int scan_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct scan_ctx *c = arg;
	if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
		c->adds = info->dlpi_adds;
	const char *name = info->dlpi_name;
	int interp = !name || !*name || strstr(name, "libpython");
	if (interp) {
		for (int i = 0; i < info->dlpi_phnum && J.ninterp < 4; i++) {
			const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
			if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && !J.scanned) {
				J.interp_lo[J.ninterp] = info->dlpi_addr + ph->p_vaddr;
				J.interp_hi[J.ninterp] = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
				J.ninterp++;
			}
		}
	}
	if (name && *name && c->n < 256) {
		strncpy(c->names[c->n], name, sizeof(c->names[0]) - 1);
		c->names[c->n][sizeof(c->names[0]) - 1] = 0;
		c->bias[c->n] = info->dlpi_addr;
		c->n++;
	}
	return 0;
}

/* A symbol the object's dynamic table does not export, from its .symtab:
 * PyPI's llvmlite links LLVM statically and keeps __jit_debug_descriptor
 * local. The file is mapped, searched once and unmapped. Returns the
 * symbol's ELF address, or 0. */
static uint64_t local_symbol(const char *path, const char *want)
{
	struct elf_section sym, str;
	if (elf_find_section(path, ".symtab", &sym) || elf_find_section(path, ".strtab", &str))
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	uint64_t found = 0;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && sym.offset + sym.size <= (uint64_t)st.st_size &&
	    str.offset + str.size <= (uint64_t)st.st_size) {
		uint8_t *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m != MAP_FAILED) {
			size_t wl = strlen(want);
			for (uint64_t k = 0; k + sizeof(Elf64_Sym) <= sym.size && !found; k += sizeof(Elf64_Sym)) {
				Elf64_Sym e;
				memcpy(&e, m + sym.offset + k, sizeof(e));
				if (ELF64_ST_TYPE(e.st_info) != STT_OBJECT || e.st_shndx == SHN_UNDEF ||
				    e.st_name + wl + 1 > str.size)
					continue;
				if (!memcmp(m + str.offset + e.st_name, want, wl + 1))
					found = e.st_value;
			}
			munmap(m, (size_t)st.st_size);
		}
	}
	close(fd);
	return found;
}

/* Looks for descriptors in every loaded object, when objects were loaded
 * since the last look. The loader is not called under our lock's users'
 * feet: this runs in the writer only. */
static int adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size < offsetof(struct dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds))
		return -1;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1; /* the counter is the same in every entry */
}

static void find_descriptors(void)
{
	static struct scan_ctx c; /* writer only; 128 KB is too much stack */
	unsigned long long adds = 0;
	/* Every pass: one callback, to see whether anything was loaded. */
	if (J.scanned && dl_iterate_phdr(adds_cb, &adds) == 1 && adds == J.adds)
		return;
	c.n = 0;
	c.adds = 0;
	dl_iterate_phdr(scan_cb, &c);
	J.scanned = 1;
	J.adds = c.adds;
	add_desc(dlsym(RTLD_DEFAULT, "__jit_debug_descriptor"));
	for (uint32_t i = 0; i < c.n; i++) {
		/* ctypes loads libllvmlite with RTLD_LOCAL: only a handle of
		 * its own finds the symbol (in it or its libLLVM). */
		if (!strstr(c.names[i], "llvm") && !strstr(c.names[i], "LLVM"))
			continue;
		void *h = dlopen(c.names[i], RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		void *d = dlsym(h, "__jit_debug_descriptor");
		dlclose(h);
		if (!d && strstr(c.names[i], "llvmlite")) {
			uint64_t v = local_symbol(c.names[i], "__jit_debug_descriptor");
			if (v)
				d = (void *)(uintptr_t)(c.bias[i] + v);
		}
		add_desc(d);
	}
}

/* ---- images ------------------------------------------------------------------ */

/* The executable sections' run-time ranges and the loaded .eh_frame of an
 * image, from its section headers. Returns 0, or -1 if it is no ELF we
 * can use. */
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
	return 0;
}

static void img_free(struct jimg *g)
{
	free(g->elf);
	free(g->ranges);
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
	uint64_t e = d->first_entry;
	uint32_t steps = 0;
	while (e) {
		struct gdb_jit_entry ent;
		if (++steps > MAX_WALK || agent_safe_read(&ent, e, sizeof(ent)))
			return -1;
		struct jimg *g = find_img(e, ent.symfile_addr, ent.symfile_size);
		if (g) {
			g->seen = 1;
		} else if (ent.symfile_size && ent.symfile_size <= MAX_IMAGE) {
			g = calloc(1, sizeof(*g));
			uint8_t *elf = g ? malloc(ent.symfile_size) : NULL;
			if (!elf || agent_safe_read(elf, ent.symfile_addr, ent.symfile_size) ||
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
					unwind_jit_add(g->id, (const uint64_t(*)[2])g->ranges, g->nranges, g->eh_addr, g->eh_len);
				notify(g, 1);
			}
		}
		e = ent.next;
	}
	return 0;
}

void jit_poll(struct wbuf *recs)
{
	pthread_mutex_lock(&J.lock);
	find_descriptors();
	int changed = 0;
	for (uint32_t i = 0; i < J.ndesc; i++) {
		struct gdb_jit_descriptor now;
		if (agent_safe_read(&now, (uint64_t)(uintptr_t)J.desc[i], sizeof(now)))
			continue;
		if (!J.dirty[i] && !memcmp(&now, &J.last[i], sizeof(now)))
			continue;
		for (struct jimg *g = J.imgs; g; g = g->next)
			if (g->desc == i)
				g->seen = 0;
		int bad = walk(i, &now, &changed, recs);
		struct gdb_jit_descriptor after;
		if (!bad && !agent_safe_read(&after, (uint64_t)(uintptr_t)J.desc[i], sizeof(after)) &&
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
