/*
 * grave.c — see grave.h. A record: u32 length, u64 addr, u64 time,
 * u32 firstlineno, u32 flags, then four length-prefixed (u32) byte strings:
 * filename, name, qualname, line table. Records never wrap: one that would
 * is preceded by a pad record (length with the top bit set).
 */
#include "grave.h"

#include <stdlib.h>
#include <string.h>

#include "agent.h"

#define PAD 0x80000000u

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static uint32_t slen(const char *s) { return s ? (uint32_t)strlen(s) : 0; }

void grave_put(struct graveyard *g, uint64_t addr, uint64_t t, const struct strata_codeinfo *ci)
{
	uint32_t fl = slen(ci->filename), nl = slen(ci->name), ql = slen(ci->qualname);
	uint32_t ll = (uint32_t)ci->linetable_len;
	uint64_t len = 4 + 8 + 8 + 4 + 4 + 16 + (uint64_t)fl + nl + ql + ll;
	len = (len + 7) & ~7ull;
	if (len > GRAVE_SIZE / 4) {
		atomic_fetch_add(&g->lost, 1);
		return;
	}
	while (atomic_exchange_explicit(&g->lock, 1, memory_order_acquire))
		;
	uint64_t head = atomic_load_explicit(&g->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&g->tail, memory_order_acquire);
	uint64_t pos = head % GRAVE_SIZE, to_end = GRAVE_SIZE - pos;
	uint64_t need = len > to_end ? to_end + len : len;
	if (head - tail + need > GRAVE_SIZE) {
		atomic_store_explicit(&g->lock, 0, memory_order_release);
		atomic_fetch_add(&g->lost, 1);
		return;
	}
	if (len > to_end) {
		put32(g->buf + pos, PAD | (uint32_t)to_end);
		head += to_end;
		pos = 0;
	}
	uint8_t *p = g->buf + pos;
	put32(p, (uint32_t)len);
	put64(p + 4, addr);
	put64(p + 12, t);
	put32(p + 20, ci->firstlineno);
	put32(p + 24, ci->flags);
	uint8_t *q = p + 28;
	const void *parts[4] = { ci->filename, ci->name, ci->qualname, ci->linetable };
	uint32_t lens[4] = { fl, nl, ql, ll };
	for (int i = 0; i < 4; i++) {
		put32(q, lens[i]);
		q += 4;
		if (lens[i])
			memcpy(q, parts[i], lens[i]);
		q += lens[i];
	}
	atomic_store_explicit(&g->head, head + len, memory_order_release);
	atomic_store_explicit(&g->lock, 0, memory_order_release);
}

static char *dupn(const uint8_t *p, uint32_t n)
{
	char *s = malloc((size_t)n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
	}
	return s;
}

int grave_take(struct graveyard *g, uint64_t *addr, uint64_t *t, struct strata_codeinfo *ci)
{
	for (;;) {
		uint64_t tail = atomic_load_explicit(&g->tail, memory_order_relaxed);
		uint64_t head = atomic_load_explicit(&g->head, memory_order_acquire);
		if (tail == head)
			return 0;
		const uint8_t *p = g->buf + tail % GRAVE_SIZE;
		uint32_t len = get32(p);
		if (len & PAD) {
			atomic_store_explicit(&g->tail, tail + (len & ~PAD), memory_order_release);
			continue;
		}
		memset(ci, 0, sizeof(*ci));
		*addr = get64(p + 4);
		*t = get64(p + 12);
		ci->firstlineno = get32(p + 20);
		ci->flags = get32(p + 24);
		const uint8_t *q = p + 28;
		uint32_t lens[4];
		const uint8_t *data[4];
		for (int i = 0; i < 4; i++) {
			lens[i] = get32(q);
			data[i] = q + 4;
			q += 4 + lens[i];
		}
		ci->filename = dupn(data[0], lens[0]);
		ci->name = dupn(data[1], lens[1]);
		ci->qualname = lens[2] ? dupn(data[2], lens[2]) : NULL;
		if (lens[3]) {
			ci->linetable = malloc(lens[3]);
			if (ci->linetable)
				memcpy(ci->linetable, data[3], lens[3]);
			ci->linetable_len = ci->linetable ? lens[3] : 0;
		}
		atomic_store_explicit(&g->tail, tail + len, memory_order_release);
		return 1;
	}
}
