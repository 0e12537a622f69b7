/*
 * ring.h — a single-producer, single-consumer byte ring for sample records.
 *
 * The producer is one thread's signal handler (or the helper's wall-mode
 * sampler); the consumer is the helper's writer. Memory is allocated once,
 * outside any handler; the producer side is lock-free and allocation-free.
 * Records are 8-byte aligned, prefixed by their length (8 bytes); a record that would
 * straddle the end is preceded by a padding record so every record is
 * contiguous and can be filled in place.
 */
#ifndef STRATA_RING_H
#define STRATA_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct ring {
	uint8_t *buf;
	uint32_t size;               /* power of two */
	_Atomic uint64_t head;       /* bytes produced (producer writes) */
	_Atomic uint64_t tail;       /* bytes consumed (consumer writes) */
};

#define RING_PAD 0x80000000u /* length flag: skip to the start of the buffer */

int ring_init(struct ring *r, uint32_t size);
void ring_free(struct ring *r);

/* Producer: returns a pointer to `max` contiguous bytes, or NULL if the
 * ring is full. Fill the record, then ring_commit() with the bytes used
 * (<= max). Nothing is visible to the consumer before the commit. */
void *ring_reserve(struct ring *r, uint32_t max);
/* Returns 1 when this record filled the ring past a quarter (the writer,
 * which naps longer while it finds nothing, is then worth waking). */
int ring_commit(struct ring *r, uint32_t used);

/* Consumer: returns the next record and its length, or NULL if empty;
 * ring_release() frees it. */
const void *ring_peek(struct ring *r, uint32_t *len);
void ring_release(struct ring *r);

#endif
