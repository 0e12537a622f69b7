/*
 * unwind-tables.h — the unwind data the signal handler reads (unwind.c)
 * and the helper builds (unwind-build.c), in the shared region.
 *
 * A snapshot (struct usnap) is an immutable, sorted array of executable
 * ranges, each pointing at its object's compiled table or, until one is
 * built, at the object itself so the handler can read its FDEs in place.
 * The helper publishes a new snapshot by swapping agent.unwind_cur and
 * frees an old one only once no slot's hazard pointer holds it.
 */
#ifndef STRATA_UNWIND_TABLES_H
#define STRATA_UNWIND_TABLES_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cfi.h"

#define MAX_SEGS 4

struct uobj {
	struct uobj *next;
	uint64_t bias;
	char *path;
	uint32_t flags;             /* MOD_* */
	uint8_t build_id[64];
	size_t build_id_len;
	uint8_t *image;             /* vDSO copy */
	size_t image_len;
	uint32_t nseg;
	uint64_t seg_start[MAX_SEGS], seg_end[MAX_SEGS], seg_off[MAX_SEGS];
	/* Its .eh_frame_hdr and the segment holding it (with the FDEs): what
	 * the handler reads in place until the table is built. 0 if none. */
	uint64_t hdr, hdr_seg, hdr_seglen;
	_Atomic uint32_t hits;      /* frames unwound through it without a table */
	uint32_t compile_at;        /* ... before its table is built */
	int compile_failed;
	struct cfi_table cfi;       /* arrays in the shared region once built */
	int has_cfi;                /* cfi is built */
	int present;                /* seen by the last scan */
	int announced;              /* REC_MODULE written in the current stream */
	int gone;                   /* unloaded: free when no snapshot uses it */
	int jit;                    /* JIT code (jit-poll.c): no module record, not found by scans */
	uint64_t jit_id;
	unsigned refs;              /* snapshots that point at it */
};

struct uent {
	uint64_t start, end;
	const struct cfi_table *t;  /* NULL: not built yet, read o's FDEs in place */
	struct uobj *o;
};

struct usnap {
	struct usnap *next_retired;
	uint32_t n;
	struct uobj **objs;         /* for reference counting */
	uint32_t nobjs;
	struct uent e[];            /* sorted by start, disjoint */
};

static inline const struct uent *usnap_find(const struct usnap *s, uint64_t pc)
{
	uint32_t lo = 0, hi = s->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->e[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || pc >= s->e[lo - 1].end)
		return NULL;
	return &s->e[lo - 1];
}

#endif
