/*
 * remote.c — see remote.h.
 */
#include "remote.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shm/agent.h"
#include "common/elfsect.h"
#include "target.h"

struct remote_state {
	pid_t pid;
	int mem;
	_Atomic uint32_t gen;   /* a cached page of another image is stale */
};

static void remote_state_init(struct remote_state *r) { r->mem = -1; }

TARGET_STATE(struct remote_state, remote, remote_state_init)
#define R (*remote_of(agentd_target))

/* Every image read gets a number of its own, whatever its target: a
 * thread's cached page names the image it came from. */
static _Atomic uint32_t images;

int remote_init(pid_t pid, int mem_fd)
{
	R.pid = pid;
	R.mem = mem_fd;
	atomic_store(&R.gen, atomic_fetch_add(&images, 1) + 1);
	return 0;
}

pid_t remote_pid(void) { return R.pid; }

static int read_direct(void *dst, uint64_t addr, size_t n);

/* ---- the page cache (remote_cache_from) ---------------------------------- */

/* 16 pages, direct-mapped by page number: a code object, its names and
 * its line table are mostly within a few pages, often shared with the
 * next one's. Resolving python -c pass's code objects took 422 reads of
 * 8 to 1024 bytes (1.7 us each here, whatever the size) over 60 pages;
 * through this cache, 79 page reads (2.2 us each). 64 KB per thread that
 * uses it (the writer), allocated at its first use. */
#define RC_SLOTS 16
#define RC_PAGE 4096ull

struct rc_slot {
	uint64_t page;      /* page address + 1; 0: empty */
	uint64_t read_at;   /* mono_ns() before the read: its copy is at least this new */
	uint32_t gen;
	char data[RC_PAGE];
};

static __thread struct rc_slot *rcache;
static __thread uint64_t rc_from;

void remote_cache_from(uint64_t t_ns)
{
	if (t_ns && !rcache)
		rcache = calloc(RC_SLOTS, sizeof(*rcache));
	rc_from = rcache ? t_ns : 0;
}

/* The cached copy of the page at `page`, read now if the copy is missing
 * or older than rc_from; NULL if unreadable. */
static const char *rc_page(uint64_t page)
{
	struct rc_slot *s = &rcache[(page / RC_PAGE) % RC_SLOTS];
	uint32_t gen = atomic_load(&R.gen);
	if (s->page == page + 1 && s->gen == gen && s->read_at >= rc_from)
		return s->data;
	uint64_t at = mono_ns();
	if (read_direct(s->data, page, RC_PAGE)) {
		s->page = 0;
		return NULL;
	}
	s->page = page + 1;
	s->gen = gen;
	s->read_at = at;
	return s->data;
}

/* n bytes at addr from the cache: 0, or -1 (the caller reads directly:
 * a page of the range may be unreadable where the range is not, at the
 * end of a mapping). */
static int rc_read(void *dst, uint64_t addr, size_t n)
{
	uint64_t first = addr & ~(RC_PAGE - 1), last = (addr + n - 1) & ~(RC_PAGE - 1);
	if (last - first > RC_PAGE)
		return -1;
	size_t done = 0;
	for (uint64_t page = first; page <= last; page += RC_PAGE) {
		const char *d = rc_page(page);
		if (!d)
			return -1;
		uint64_t from = addr + done;
		size_t len = (size_t)(page + RC_PAGE - from);
		if (len > n - done)
			len = n - done;
		memcpy((char *)dst + done, d + (from - page), len);
		done += len;
	}
	return 0;
}

int remote_read(void *dst, uint64_t addr, size_t n)
{
	if (!addr || R.mem < 0)
		return -1;
	if (rc_from && n && n <= RC_PAGE && addr + n > addr && rc_read(dst, addr, n) == 0)
		return 0;
	return read_direct(dst, addr, n);
}

static int read_direct(void *dst, uint64_t addr, size_t n)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(R.mem, (char *)dst + done, n - done, (off_t)(addr + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		done += (size_t)r;
	}
	return 0;
}

int remote_write(uint64_t addr, const void *src, size_t n)
{
	if (!addr || R.mem < 0)
		return -1;
	ssize_t r;
	do
		r = pwrite(R.mem, src, n, (off_t)addr);
	while (r < 0 && errno == EINTR);
	return r == (ssize_t)n ? 0 : -1;
}

int remote_read_cb(void *ctx, void *dst, uint64_t addr, size_t n)
{
	(void)ctx;
	return remote_read(dst, addr, n);
}

int remote_read_str(char *dst, uint64_t addr, size_t n)
{
	size_t got = 0;
	while (got + 1 < n) {
		/* Up to the end of the page: the next may be unmapped. */
		size_t chunk = 4096 - (size_t)((addr + got) & 4095);
		if (chunk > n - 1 - got)
			chunk = n - 1 - got;
		if (remote_read(dst + got, addr + got, chunk))
			return -1;
		void *z = memchr(dst + got, 0, chunk);
		if (z)
			return 0;
		got += chunk;
	}
	dst[n - 1] = 0;
	return 0;
}

/* remote_objects_gen's full walk, at least this often. */
#define GEN_FULL_NS (100 * 1000000ull)

/* The public head of glibc's struct link_map and struct r_debug. */
struct rlink {
	uint64_t l_addr, l_name, l_ld, l_next, l_prev;
};

static int read_phdrs_file(struct robj *o)
{
	int fd = open(o->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	Elf64_Ehdr eh;
	int rc = -1;
	if (pread(fd, &eh, sizeof(eh), 0) == (ssize_t)sizeof(eh) && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
		/* All of them in one read, as many as fit. */
		Elf64_Phdr ph[64];
		uint32_t want = eh.e_phnum < 64 ? eh.e_phnum : 64;
		ssize_t got = want ? pread(fd, ph, want * sizeof(ph[0]), (off_t)eh.e_phoff) : 0;
		o->nph = 0;
		for (uint32_t i = 0; got > 0 && i < (uint32_t)((size_t)got / sizeof(ph[0])); i++)
			o->ph[o->nph++] = (struct rseg){ ph[i].p_vaddr, ph[i].p_memsz, ph[i].p_filesz, ph[i].p_offset,
							 ph[i].p_type, ph[i].p_flags };
		rc = o->nph ? 0 : -1;
	}
	close(fd);
	return rc;
}

/* The ELF header and program headers read from the target's memory at
 * addr (the vDSO; any object whose file is gone). */
static int read_phdrs_mem(struct robj *o, uint64_t ehdr_addr)
{
	Elf64_Ehdr eh;
	if (remote_read(&eh, ehdr_addr, sizeof(eh)) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		return -1;
	o->nph = 0;
	for (uint32_t i = 0; i < eh.e_phnum && o->nph < 64; i++) {
		Elf64_Phdr p;
		if (remote_read(&p, ehdr_addr + eh.e_phoff + (uint64_t)i * sizeof(p), sizeof(p)))
			break;
		o->ph[o->nph++] = (struct rseg){ p.p_vaddr, p.p_memsz, p.p_filesz, p.p_offset, p.p_type, p.p_flags };
	}
	return o->nph ? 0 : -1;
}

/* The first entry of the target's link map (r_debug's r_map, after its
 * int r_version): 0, or -1 if unreadable. */
static int list_head(uint64_t *first)
{
	uint64_t rd = agent.r_debug;
	struct {
		int32_t version;
		int32_t pad;
		uint64_t map;
	} head;
	if (!rd || remote_read(&head, rd, sizeof(head)))
		return -1;
	*first = head.map;
	return 0;
}

int remote_objects(int (*fn)(const struct robj *o, void *data), void *data)
{
	uint64_t at;
	if (list_head(&at))
		return -1;
	struct robj *o = malloc(sizeof(*o));
	if (!o)
		return -1;
	for (int steps = 0; at && steps < 100000; steps++) {
		struct rlink l;
		if (remote_read(&l, at, sizeof(l))) {
			free(o);
			return -1;
		}
		memset(o, 0, offsetof(struct robj, ph));
		o->bias = l.l_addr;
		o->ld = l.l_ld;
		if (l.l_name && remote_read_str(o->name, l.l_name, sizeof(o->name)))
			o->name[0] = 0;
		int ok = -1;
		if (steps == 0) {
			/* The executable is first, with an empty name. Its
			 * headers are read through /proc: the file may have
			 * been replaced or deleted since it started. */
			o->is_main = 1;
			char p[64];
			snprintf(p, sizeof(p), "/proc/%d/exe", (int)R.pid);
			snprintf(o->path, sizeof(o->path), "%s", p);
			ok = read_phdrs_file(o);
			ssize_t n = readlink(p, o->path, sizeof(o->path) - 1);
			o->path[n > 0 ? n : 0] = 0;
		} else if (!strncmp(o->name, "linux-vdso", 10) || !strncmp(o->name, "linux-gate", 10)) {
			o->is_vdso = 1;
			snprintf(o->path, sizeof(o->path), "[vdso]");
			ok = agent.vdso ? read_phdrs_mem(o, agent.vdso) : -1;
		} else if (o->name[0]) {
			snprintf(o->path, sizeof(o->path), "%s", o->name);
			ok = read_phdrs_file(o);
			if (ok)
				ok = read_phdrs_mem(o, o->bias);
		}
		if (ok == 0 && fn(o, data))
			break;
		at = l.l_next;
	}
	free(o);
	return 0;
}

/* The fingerprint of the whole list, and its last entry with that
 * entry's l_prev; 0 if unreadable. */
static uint64_t walk_gen(uint64_t *head_map, uint64_t *tail, uint64_t *tail_prev)
{
	if (list_head(head_map))
		return 0;
	uint64_t h = 0xcbf29ce484222325ull;
	uint64_t at = *head_map;
	*tail = *tail_prev = 0;
	for (int steps = 0; at && steps < 100000; steps++) {
		struct rlink l;
		if (remote_read(&l, at, sizeof(l)))
			return 0;
		h = (h ^ l.l_addr) * 0x100000001b3ull;
		h = (h ^ l.l_ld) * 0x100000001b3ull;
		h = (h ^ at) * 0x100000001b3ull;
		*tail = at;
		*tail_prev = l.l_prev;
		at = l.l_next;
	}
	return h | 1;
}

uint64_t remote_objects_gen_full(void)
{
	uint64_t a, b, c;
	return walk_gen(&a, &b, &c);
}

/* The last full walk, per thread: its fingerprint, when, and the list's
 * last entry then (its address and its link to the one before). */
static __thread struct {
	uint64_t gen, at_ns, head, tail, tail_prev;
	uint32_t rgen;
} G;

uint64_t remote_objects_gen(void)
{
	uint64_t now = mono_ns(), first;
	uint32_t rgen = atomic_load(&R.gen);
	if (G.gen && G.rgen == rgen && now - G.at_ns < GEN_FULL_NS && !list_head(&first) && first == G.head) {
		/* The same first entry, and the same last one still last
		 * (a dlopen appends), still after the same entry, which
		 * still links to it (an unloaded entry's own links are
		 * left as they were). */
		struct rlink l, p;
		if (G.tail && !remote_read(&l, G.tail, sizeof(l)) && !l.l_next && l.l_prev == G.tail_prev &&
		    (!G.tail_prev || (!remote_read(&p, G.tail_prev, sizeof(p)) && p.l_next == G.tail)))
			return G.gen;
	}
	G.gen = walk_gen(&G.head, &G.tail, &G.tail_prev);
	G.at_ns = now;
	G.rgen = rgen;
	return G.gen;
}
