/*
 * ring.c — SPSC byte ring; see ring.h. Its memory is in the shared region.
 * Layout of a slot: a 4-byte length word at an 8-byte aligned position,
 * 4 bytes unused, then the record, 8-byte aligned too (a record holds
 * 8-byte fields, read and written in place: with a 4-byte header they were
 * all misaligned, which the helper built with UBSan stopped at). The
 * reservation remembers where it started so the commit writes the final
 * length there.
 */
#include "ring.h"

#include <string.h>

#include "shm.h"

#define ALIGN8(x) (((x) + 7u) & ~7u)
#define HDR 8u /* the length word and its padding */

int ring_init(struct ring *r, uint32_t size)
{
	memset(r, 0, sizeof(*r));
	if (size < 4096 || (size & (size - 1)))
		return -1;
	/* In the shared region: the producer is a thread of the profiled
	 * process, the consumer the helper's writer. Blocks of this size are
	 * page aligned, which keeps the data off the slot's cache lines.
	 * Nothing is read that was not written first (a length word is
	 * read only between tail and head): a reused block is not cleared,
	 * which would cost a thread's start a pass over the whole ring. */
	void *p = shm_alloc_dirty(size);
	if (!p)
		return -1;
	r->buf = p;
	r->size = size;
	return 0;
}

void ring_free(struct ring *r)
{
	if (r->buf)
		shm_free(r->buf);
	r->buf = NULL;
}

void *ring_reserve(struct ring *r, uint32_t max)
{
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	uint32_t need = ALIGN8(max + HDR);
	uint32_t pos = (uint32_t)(head & (r->size - 1));
	uint32_t to_end = r->size - pos;
	uint64_t used = head - tail;
	if (need > r->size / 2)
		return NULL;
	if (need > to_end) {
		/* Pad to the end, then start at offset 0. */
		if (used + to_end + need > r->size)
			return NULL;
		*(uint32_t *)(r->buf + pos) = RING_PAD | to_end;
		head += to_end;
		atomic_store_explicit(&r->head, head, memory_order_release);
		pos = 0;
	} else if (used + need > r->size) {
		return NULL;
	}
	return r->buf + pos + HDR;
}

int ring_commit(struct ring *r, uint32_t used)
{
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint32_t pos = (uint32_t)(head & (r->size - 1));
	uint32_t len = ALIGN8(used + HDR);
	*(uint32_t *)(r->buf + pos) = used;
	atomic_store_explicit(&r->head, head + len, memory_order_release);
	uint64_t before = head - atomic_load_explicit(&r->tail, memory_order_relaxed);
	return before < r->size / 4 && before + len >= r->size / 4;
}

const void *ring_peek(struct ring *r, uint32_t *len)
{
	for (;;) {
		uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
		uint64_t head = atomic_load_explicit(&r->head, memory_order_acquire);
		if (tail == head)
			return NULL;
		uint32_t pos = (uint32_t)(tail & (r->size - 1));
		uint32_t w = *(uint32_t *)(r->buf + pos);
		if (w & RING_PAD) {
			atomic_store_explicit(&r->tail, tail + (w & ~RING_PAD), memory_order_release);
			continue;
		}
		*len = w;
		return r->buf + pos + HDR;
	}
}

void ring_release(struct ring *r)
{
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint32_t pos = (uint32_t)(tail & (r->size - 1));
	uint32_t w = *(uint32_t *)(r->buf + pos);
	atomic_store_explicit(&r->tail, tail + ALIGN8(w + HDR), memory_order_release);
}
