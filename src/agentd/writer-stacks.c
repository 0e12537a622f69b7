/*
 * writer-stacks.c — the writer's stacks and the code objects they name;
 * see writer.h.
 *
 * In strata-agentd, called by the writer's drain pass (writer.c) for each
 * sample: interns the sample's stack so that a repeated one costs a few
 * bytes, writes a new stack's REC_CODE records first (read from the
 * target, or as the deallocation hook kept them at a code object's
 * death), and for a stack with an address in no known object re-reads the
 * perf map and the JIT list before its REC_STACK. Apart from writer.c: the
 * intern tables and the code objects' lifetimes are a subject of their
 * own, which the pass reaches only through stack_index and the deaths.
 */
#include <stdlib.h>
#include <string.h>

#include "shm/agent.h"
#include "agentd.h"
#include "shm/grave.h"
#include "perfread.h"
#include "remote.h"
#include "shm/unwind.h"
#include "common/format.h"
#include "tasks.h"
#include "writer.h"

/* ---- intern tables ---------------------------------------------------- */

/* Interning is reset past this many stacks so memory stays bounded in very
 * long runs; indices keep increasing, so readers are unaffected. */
#define MAX_INTERNED_STACKS (1u << 20)

static uint64_t fnv1a(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h | 1; /* 0 marks an empty slot */
}

void itab_free(struct itab *t)
{
	free(t->hash);
	free(t->id);
	free(t->off);
	free(t->len);
	wbuf_free(&t->arena);
	memset(t, 0, sizeof(*t));
}

static int itab_grow(struct itab *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 1024;
	uint64_t *h = calloc(cap, sizeof(*h));
	uint32_t *id = calloc(cap, sizeof(*id)), *off = calloc(cap, sizeof(*off)),
		 *len = calloc(cap, sizeof(*len));
	if (!h || !id || !off || !len) {
		free(h);
		free(id);
		free(off);
		free(len);
		return -1;
	}
	for (uint32_t i = 0; i < t->cap; i++) {
		if (!t->hash[i])
			continue;
		uint32_t j = (uint32_t)t->hash[i] & (cap - 1);
		while (h[j])
			j = (j + 1) & (cap - 1);
		h[j] = t->hash[i];
		id[j] = t->id[i];
		off[j] = t->off[i];
		len[j] = t->len[i];
	}
	free(t->hash);
	free(t->id);
	free(t->off);
	free(t->len);
	t->hash = h;
	t->id = id;
	t->off = off;
	t->len = len;
	t->cap = cap;
	return 0;
}

/* Returns the id stored for key, or inserts `new_id` and returns
 * UINT32_MAX to say it was new (or on OOM, in which case *oom is set). */
static uint32_t itab_get_or_add(struct itab *t, const void *key, uint32_t klen, uint32_t new_id, int *oom)
{
	if ((t->count + 1) * 4 >= t->cap * 3 && itab_grow(t)) {
		*oom = 1;
		return UINT32_MAX;
	}
	uint64_t h = fnv1a(key, klen);
	uint32_t j = (uint32_t)h & (t->cap - 1);
	while (t->hash[j]) {
		if (t->hash[j] == h && t->len[j] == klen &&
		    memcmp(t->arena.data + t->off[j], key, klen) == 0)
			return t->id[j];
		j = (j + 1) & (t->cap - 1);
	}
	size_t off = t->arena.len;
	wbuf_put(&t->arena, key, klen);
	if (t->arena.oom || off > UINT32_MAX) {
		*oom = 1;
		return UINT32_MAX;
	}
	t->hash[j] = h;
	t->id[j] = new_id;
	t->off[j] = (uint32_t)off;
	t->len[j] = klen;
	t->count++;
	return UINT32_MAX;
}

/* ---- code table ----------------------------------------------------------- */

static uint32_t chash(uint64_t addr, uint16_t first)
{
	return (uint32_t)(((addr >> 4) ^ ((uint64_t)first << 40)) * 0x9E3779B97F4A7C15ull >> 32);
}

struct centry *ctab_find(struct ctab *t, uint64_t addr, uint16_t first)
{
	if (!t->cap)
		return NULL;
	for (uint32_t j = chash(addr, first) & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
		struct centry *e = &t->e[j];
		if (!e->used)
			return NULL;
		if (e->addr == addr && e->first == first)
			return e;
	}
}

static int ctab_add(struct ctab *t, uint64_t addr, uint16_t first, uint32_t index, uint64_t dies_at)
{
	if ((t->count + 1) * 2 > t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 1024;
		struct centry *n = calloc(cap, sizeof(*n));
		if (!n)
			return -1;
		for (uint32_t i = 0; i < t->cap; i++) {
			if (!t->e[i].used)
				continue;
			uint32_t j = chash(t->e[i].addr, t->e[i].first) & (cap - 1);
			while (n[j].used)
				j = (j + 1) & (cap - 1);
			n[j] = t->e[i];
		}
		free(t->e);
		t->e = n;
		t->cap = cap;
	}
	uint32_t j = chash(addr, first) & (t->cap - 1);
	while (t->e[j].used)
		j = (j + 1) & (t->cap - 1);
	t->e[j] = (struct centry){ .addr = addr, .dies_at = dies_at, .index = index, .first = first, .used = 1 };
	t->count++;
	return 0;
}

static void ctab_remove(struct ctab *t, struct centry *e)
{
	uint32_t i = (uint32_t)(e - t->e), m = t->cap - 1;
	t->e[i].used = 0;
	t->count--;
	/* Shift back later members of the probe run that can move closer. */
	for (uint32_t j = (i + 1) & m; t->e[j].used; j = (j + 1) & m) {
		uint32_t home = chash(t->e[j].addr, t->e[j].first) & m;
		if (((j - home) & m) >= ((j - i) & m)) {
			t->e[i] = t->e[j];
			t->e[j].used = 0;
			i = j;
		}
	}
}

void ctab_drop_dead(struct ctab *t)
{
	for (uint32_t i = 0; i < t->cap;) {
		if (t->e[i].used && t->e[i].dies_at)
			ctab_remove(t, &t->e[i]); /* may shift a live entry into i: look again */
		else
			i++;
	}
}

void ctab_free(struct ctab *t)
{
	free(t->e);
	memset(t, 0, sizeof(*t));
}

/* ---- code object deaths ------------------------------------------------- */

static void codeinfo_free(struct strata_codeinfo *ci)
{
	free(ci->filename);
	free(ci->name);
	free(ci->qualname);
	free(ci->linetable);
	memset(ci, 0, sizeof(*ci));
}

void deaths_free(struct death *d)
{
	while (d) {
		struct death *n = d->next;
		codeinfo_free(&d->info);
		free(d);
		d = n;
	}
}

struct death *deaths_take(void)
{
	struct death *list = NULL;
	for (;;) {
		struct death *d = malloc(sizeof(*d));
		if (!d)
			break;
		if (!grave_take(agent.grave, &d->addr, &d->t, &d->info)) {
			free(d);
			break;
		}
		/* The program's hook cannot read source files (it holds the
		 * GIL): the qualified name of a pre-3.11 code object is
		 * rebuilt here. */
		if (!d->info.qualname)
			d->info.qualname = agentd_reader->qualname(d->info.filename, d->info.firstlineno, d->info.name);
		d->next = list;
		list = d;
	}
	return list;
}

/* ---- records -------------------------------------------------------------- */

static void put_code(uint32_t id, uint64_t addr, const struct strata_codeinfo *ci)
{
	struct rec_code rc = {
		.index = id,
		.addr = addr,
		.linetable_fmt = (uint32_t)agentd_reader->linetable_fmt,
		.firstlineno = ci->firstlineno,
		.flags = ci->flags,
		.filename = ci->filename,
		.name = ci->name,
		.qualname = ci->qualname ? ci->qualname : ci->name,
		.linetable = ci->linetable,
		.linetable_len = ci->linetable_len,
	};
	rec_put_code(&W.recs, &rc);
}

/* The REC_CODE index of the code object a frame of a sample taken at time
 * `t` refers to, emitting the REC_CODE record the first time. */
static uint32_t code_index(const struct strata_pyframe *f, uint64_t t)
{
	struct centry *e = ctab_find(&W.codes, f->code, f->first);
	if (e) {
		if (!e->dies_at || t < e->dies_at)
			return e->index;
		ctab_remove(&W.codes, e); /* a new object at a dead one's address */
	}
	uint32_t id = W.next_code++;
	uint64_t dies_at = 0;
	struct strata_codeinfo ci;
	/* Died after this sample was taken: its contents were kept. */
	for (struct death *d = W.dying; d; d = d->next)
		if (d->addr == f->code && (uint16_t)d->info.firstlineno == f->first && d->t > t) {
			put_code(id, f->code, &d->info);
			dies_at = d->t;
			goto added;
		}
	/* Through the page cache: read no earlier than the sample. */
	remote_cache_from(t);
	int got = agentd_reader->read_code(f->code, &ci);
	remote_cache_from(0);
	if (got == 0 && (uint16_t)ci.firstlineno == f->first) {
		put_code(id, f->code, &ci);
		codeinfo_free(&ci);
	} else {
		/* Freed before it could be read, and not seen by the hook (it
		 * died before the hook was installed, or memory was short). */
		if (ci.filename || ci.name)
			codeinfo_free(&ci);
		struct strata_codeinfo unk = { .filename = "<unknown>", .name = "[code object freed before it was read]" };
		struct rec_code rc = { .index = id, .addr = f->code, .filename = unk.filename, .name = unk.name,
				       .qualname = unk.name, .linetable_fmt = LT_NONE };
		rec_put_code(&W.recs, &rc);
	}
added:
	ctab_add(&W.codes, f->code, f->first, id, dies_at);
	return id;
}

uint32_t stack_index(const struct rsample *h, const struct strata_pyframe *py, uint32_t npy, const uint64_t *native,
		     const struct tstack *ts)
{
	/* Code records must precede the stack record that names them. */
	if (W.pyf_cap < npy) {
		struct rec_pyframe *n = realloc(W.pyf, npy * sizeof(*n));
		if (!n)
			return UINT32_MAX;
		W.pyf = n;
		W.pyf_cap = npy;
	}
	wbuf_reset(&W.key);
	wbuf_uv(&W.key, h->stack_flags);
	wbuf_uv(&W.key, h->py_missing);
	wbuf_uv(&W.key, npy);
	for (uint32_t i = 0; i < npy; i++) {
		W.pyf[i].code = code_index(&py[i], h->time_ns);
		W.pyf[i].lasti = py[i].lasti;
		W.pyf[i].flags = py[i].flags;
		wbuf_uv(&W.key, W.pyf[i].code);
		wbuf_sv(&W.key, W.pyf[i].lasti);
		wbuf_uv(&W.key, W.pyf[i].flags);
	}
	wbuf_uv(&W.key, h->nnative);
	for (uint32_t i = 0; i < h->nnative; i++)
		wbuf_uv(&W.key, native[i]);
	if (ts) {
		wbuf_uv(&W.key, ts->ntasks);
		for (uint32_t i = 0; i < ts->ntasks; i++) {
			wbuf_uv(&W.key, ts->tasks[i].at);
			wbuf_uv(&W.key, ts->tasks[i].task);
			wbuf_uv(&W.key, ts->tasks[i].flags);
		}
		wbuf_uv(&W.key, ts->loop_at);
	}
	if (W.key.oom)
		return UINT32_MAX;
	if (W.stacks.count >= MAX_INTERNED_STACKS)
		itab_free(&W.stacks);
	int oom = 0;
	uint32_t id = itab_get_or_add(&W.stacks, W.key.data, (uint32_t)W.key.len, W.next_stack, &oom);
	if (id != UINT32_MAX)
		return id;
	if (oom)
		return UINT32_MAX;
	id = W.next_stack++;
	if (h->nnative) {
		/* Without --native the one address is a JIT leaf, which its
		 * REC_JIT_IMAGE covers: no object to announce. */
		int outside = agent.cfg.native ? unwind_cover(native, h->nnative, &W.recs) : 1;
		/* The CLI names a stack's addresses when the stack arrives, and
		 * generated code can be announced, run and sampled between this
		 * pass's reading of the perf map and JIT list and its draining
		 * of the rings: read them again first, for a stack with an
		 * address in no object. Cheap when nothing changed, and a stack
		 * is written once. */
		if (outside) {
			perfread_poll(&W.recs);
			jit_poll(&W.recs);
		}
		perfread_cover(native, h->nnative, &W.recs);
	}
	struct rec_stack st = {
		.index = id,
		.flags = h->stack_flags,
		.npy = npy,
		.py = W.pyf,
		.py_missing = h->py_missing,
		.nnative = h->nnative,
		.native = (uint64_t *)native,
		.ntasks = ts ? ts->ntasks : 0,
		.tasks = ts ? ts->tasks : NULL,
		.loop_at = ts ? ts->loop_at : 0,
	};
	rec_put_stack(&W.recs, &st);
	return id;
}
