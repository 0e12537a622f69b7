/*
 * writer-objects.c — the helper's side of allocation sampling
 * (--objects): writes each sampled allocation as REC_ALLOC when its
 * thread's ring is drained, names object types (REC_OBJ_TYPE, interned
 * per stream), and watches the shared table of sampled blocks
 * (objects.h) for types learnt and blocks freed.
 *
 * A block's type is known once the object in it is set up, which is
 * after the allocator returned. The profiled process reads it at the
 * block's free (while the object is still whole); a block that lives on
 * is read here, from the target's memory, once it has been live for a
 * pass (and at the end, every one still alive). Only the writer empties
 * a freed slot, and only after its REC_ALLOC is out, so a REC_FREE never
 * precedes its allocation in a stream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shm/agent.h"
#include "agentd.h"
#include "shm/objects.h"
#include "common/format.h"
#include "target.h"

/* Type pointer and tag -> REC_OBJ_TYPE index, for this stream. */
#define TYPEMAP_SIZE 8192
struct wobj_state {
	uint64_t key[TYPEMAP_SIZE];
	uint64_t tag[TYPEMAP_SIZE];
	uint32_t index[TYPEMAP_SIZE];
	uint32_t next;
	uint64_t last_scan;
	uint64_t lost_base;    /* the table's lost count as this stream began */
};

static void wobj_init(struct wobj_state *s)
{
	s->next = 1;
}

TARGET_STATE(struct wobj_state, wobj, wobj_init)
#define T (*wobj_of(agentd_target))

void wobj_reset(void)
{
	memset(T.key, 0, sizeof(T.key));
	memset(T.tag, 0, sizeof(T.tag));
	T.next = 1;
	T.lost_base = agent.objtab ? atomic_load(&agent.objtab->lost) : 0;
}

/* Allocation samples the hooks could not keep (a ring still full after
 * waiting for its writer, or a thread without a slot): one note at the
 * stream's end, so the totals are known to be low. */
static void note_lost(struct wbuf *recs, struct objtab *t)
{
	uint64_t lost = atomic_load(&t->lost) - T.lost_base;
	if (!lost)
		return;
	T.lost_base += lost;
	char text[300];
	snprintf(text, sizeof(text), "%llu allocation sample%s could not be recorded (a thread's ring stayed full while "
		 "the writer fell behind, or the thread had no slot): allocation and live totals are low by about that "
		 "many samples of --objects-rate bytes",
		 (unsigned long long)lost, lost == 1 ? "" : "s");
	struct rec_note r = { .time_ns = mono_ns(), .kind = NOTE_LIMITED, .text = text };
	rec_put_note(recs, &r);
}

/* The name the hooks read for (type, tag), into buf: 0, or -1. */
static int hooks_name(uint64_t type, uint64_t tag, char *buf, size_t n)
{
	struct objtab *t = agent.objtab;
	uint32_t h = objnames_home(type, tag);
	for (uint32_t i = 0; t && i < OBJNAMES_PROBE; i++) {
		struct objname *e = &t->names[(h + i) & (OBJNAMES_SIZE - 1)];
		uint64_t cur = atomic_load_explicit(&e->type, memory_order_acquire);
		if (!cur)
			return -1;
		if (cur == type && e->tag == tag) {
			snprintf(buf, n, "%.*s", OBJNAME_LEN - 1, e->name);
			return 0;
		}
	}
	return -1;
}

/* The name of (type, tag): as the hooks read it, or from the target
 * now, if the type at that address is still the one the tag says. */
static void type_name(uint64_t type, uint64_t tag, char *buf, size_t n)
{
	uint64_t now = 0;
	if (hooks_name(type, tag, buf, n) == 0)
		return;
	if (agentd_reader->type_name && agentd_reader->type_name(type, buf, n, &now) == 0 && now == tag)
		return;
	snprintf(buf, n, "[unreadable type]");
}

/* The index of type `type` with identity `tag`, writing its REC_OBJ_TYPE
 * the first time; 0 for none. */
static uint32_t type_index(struct wbuf *recs, uint64_t type, uint64_t tag)
{
	if (type == OBJTYPE_UNKNOWN || type == OBJTYPE_NONE || type == OBJTYPE_BUSY)
		return 0;
	uint32_t h = (uint32_t)(((type >> 4) ^ (tag >> 4)) * 0x9E3779B97F4A7C15ull >> 51) & (TYPEMAP_SIZE - 1);
	for (uint32_t i = 0; i < TYPEMAP_SIZE; i++) {
		uint32_t k = (h + i) & (TYPEMAP_SIZE - 1);
		if (T.key[k] == type && T.tag[k] == tag)
			return T.index[k];
		if (T.key[k])
			continue;
		char name[256];
		type_name(type, tag, name, sizeof(name));
		struct rec_obj_type r = { .index = T.next, .name = name };
		rec_put_obj_type(recs, &r);
		T.key[k] = type;
		T.tag[k] = tag;
		T.index[k] = T.next;
		return T.next++;
	}
	return 0; /* more types than the map holds: shown as their domain */
}

void wobj_put_alloc(struct wbuf *recs, const struct rsample *h, uint32_t stack, int64_t dt_ns)
{
	const uint64_t *w = (const uint64_t *)(h + 1);
	struct rec_alloc a = {
		.tid = h->tid,
		.dt_ns = dt_ns,
		.stack = stack,
		.id = w[AW_ID],
		.size = w[AW_SIZE],
		.domain = (uint32_t)(w[AW_META] & 0xff),
		.flags = (uint32_t)(w[AW_META] >> 8),
	};
	struct objtab *t = agent.objtab;
	if (t && w[AW_SLOT] < OBJTAB_SIZE) {
		struct objent *e = &t->e[w[AW_SLOT]];
		if (e->id == a.id) {
			uint64_t ty = atomic_load(&e->type);
			if ((ty != OBJTYPE_UNKNOWN && ty != OBJTYPE_BUSY) || a.domain != ALLOC_OBJ) {
				a.type = type_index(recs, ty, e->tag);
				e->type_written = 1;
			}
			e->written = 1;
		}
	}
	rec_put_alloc(recs, &a);
}

static void scan_slot(struct wbuf *recs, struct objtab *t, uint32_t k, int final);

void wobj_scan(struct wbuf *recs, int final)
{
	struct objtab *t = agent.objtab;
	if (!t)
		return;
	uint64_t now = mono_ns();
	if (!final && now - T.last_scan < 100 * 1000000ull)
		return;
	T.last_scan = now;
	for (uint32_t w = 0; w < OBJTAB_SIZE / 64; w++)
		for (uint64_t bits = atomic_load(&t->used[w]); bits; bits &= bits - 1)
			scan_slot(recs, t, w * 64 + (uint32_t)__builtin_ctzll(bits), final);
	if (final)
		note_lost(recs, t);
}

/* One slot of the table, not empty when its bit was read. */
static void scan_slot(struct wbuf *recs, struct objtab *t, uint32_t k, int final)
{
	struct objent *e = &t->e[k];
	uint32_t st = atomic_load_explicit(&e->state, memory_order_acquire);
	if ((st != OBJ_LIVE && st != OBJ_FREED) || !e->written)
		return;
	if (!e->type_written) {
		uint64_t ty = atomic_load(&e->type);
		if (ty == OBJTYPE_UNKNOWN && st == OBJ_LIVE && (final || e->scans++ >= 1)) {
			/* Alive a pass on: its object is set up. A free
			 * racing with this read has read the type itself
			 * first, and published it first (BUSY while its
			 * tag goes in). */
			uint64_t tag = 0;
			uint64_t got = agentd_reader->obj_type ? agentd_reader->obj_type(e->addr, e->size, &tag) : 0;
			uint64_t exp = OBJTYPE_UNKNOWN;
			if (atomic_compare_exchange_strong(&e->type, &exp, OBJTYPE_BUSY)) {
				e->tag = tag;
				atomic_store(&e->type, got ? got : OBJTYPE_NONE);
			}
			ty = atomic_load(&e->type);
		}
		if (ty != OBJTYPE_UNKNOWN && ty != OBJTYPE_BUSY) {
			uint32_t ix = type_index(recs, ty, e->tag);
			if (ix) {
				struct rec_alloc_type r = { .id = e->id, .type = ix };
				rec_put_alloc_type(recs, &r);
			}
			e->type_written = 1;
		}
	}
	if (st == OBJ_FREED) {
		if (!e->type_written && e->domain == ALLOC_OBJ) {
			/* Freed unread (its reader was busy): nothing
			 * more to learn. */
			e->type_written = 1;
		}
		struct rec_free f = { .id = e->id, .time_ns = e->free_ns };
		rec_put_free(recs, &f);
		e->addr = 0;
		atomic_fetch_and(&t->used[k / 64], ~(1ull << (k % 64)));
		atomic_store_explicit(&e->state, OBJ_EMPTY, memory_order_release);
	}
}
