/*
 * objects.h — allocation sampling (strata record --objects): the shared
 * table of sampled blocks, between the profiled process's allocator hooks
 * (objects.c, objects-sample.c) and the helper's writer (writer-objects.c).
 *
 * The hooks sample allocations by bytes (a Poisson process: one sample
 * per objects_rate bytes on average), capture the stack into the thread's
 * ring like a time sample (sampler.c), and enter the block into this
 * table, so that its free is seen: every free checks a small counting
 * filter first, and only a possible hit probes the table. The helper
 * writes the allocation when it drains the ring, learns each block's
 * type (from the hook at its free, or by reading the block while it
 * lives), and writes frees. docs/objects.md has the why.
 */
#ifndef STRATA_OBJECTS_H
#define STRATA_OBJECTS_H

#include <stdatomic.h>
#include <stdint.h>

#define OBJTAB_BITS 16
#define OBJTAB_SIZE (1u << OBJTAB_BITS)  /* sampled blocks alive at once */
#define OBJTAB_WINDOW 16                  /* slots probed from a block's home slot */
#define OBJFILTER_BITS 15
#define OBJFILTER_SIZE (1u << OBJFILTER_BITS)

enum objent_state {
	OBJ_EMPTY = 0,
	OBJ_CLAIMED = 1,  /* a hook is filling it in */
	OBJ_LIVE = 2,     /* allocated, not freed */
	OBJ_FREED = 3,    /* freed; the writer writes the free and empties it */
};

/* Types that are not type pointers. */
#define OBJTYPE_UNKNOWN 0 /* not read yet */
#define OBJTYPE_NONE 1    /* read: the block holds no object we can tell */
#define OBJTYPE_BUSY 2    /* being read: tag follows, then the type */

struct objent {
	_Atomic uint32_t state;
	uint8_t domain;              /* enum alloc_domain */
	uint8_t written;             /* writer: its REC_ALLOC is out */
	uint8_t type_written;        /* writer: its type is out (or there is none) */
	uint8_t scans;               /* writer: passes seen live without a type */
	uint64_t addr;
	uint64_t id;
	uint64_t size;
	_Atomic uint64_t type;       /* OBJTYPE_* or a PyTypeObject* */
	uint64_t tag;                /* the type's identity word, set before type */
	uint64_t free_ns;
};

/* Type names read by the hooks, in the profiled process, while the type
 * surely lived (an object of it was being freed): a class may be gone by
 * the time the helper would read its name (the instances that the
 * interpreter frees as it finalizes, then their class). Keyed by type
 * and tag; entries are only added. */
#define OBJNAMES_SIZE 1024
#define OBJNAMES_PROBE 32
#define OBJNAME_LEN 112
#define OBJNAME_CLAIMED 1 /* type word while the entry is written */
struct objname {
	_Atomic uint64_t type;
	uint64_t tag;
	char name[OBJNAME_LEN];
};

static inline uint32_t objnames_home(uint64_t type, uint64_t tag)
{
	return (uint32_t)(((type >> 3) ^ (tag >> 3)) * 0x9E3779B97F4A7C15ull >> 54) & (OBJNAMES_SIZE - 1);
}

struct objtab {
	_Atomic uint64_t next_id;
	_Atomic uint64_t untracked;  /* samples whose block could not be entered */
	_Atomic uint64_t lost;       /* samples not taken: no slot, ring full */
	/* The counting filter: sampled blocks alive per cell. */
	_Atomic uint8_t filter[OBJFILTER_SIZE];
	/* A bit per cell, set while its count is not zero: what every free
	 * reads (4 KiB stay in the L1 cache where the 32 KiB of counts did
	 * not: a third of a free hook's cost was that load missing). */
	_Atomic uint8_t filter_bits[OBJFILTER_SIZE / 8];
	/* Slots not empty, a bit each: the writer visits those alone (the
	 * table is 3 MiB; a pass over it all every 100 ms cost the helper
	 * more than the rest of its work on allocation-heavy programs). Set
	 * by a hook after it claims a slot, cleared before the slot is
	 * emptied. */
	_Atomic uint64_t used[OBJTAB_SIZE / 64];
	struct objent e[OBJTAB_SIZE];
	struct objname names[OBJNAMES_SIZE];
};

static inline uint32_t objtab_home(uint64_t addr)
{
	return (uint32_t)((addr >> 4) * 0x9E3779B97F4A7C15ull >> (64 - OBJTAB_BITS));
}

static inline uint32_t objfilter_slot(uint64_t addr)
{
	return (uint32_t)((addr >> 4) * 0xC2B2AE3D27D4EB4Full >> (64 - OBJFILTER_BITS));
}

/* The ring record of an allocation sample (struct rsample with
 * RS_ALLOC in sample_flags) carries these words where a time sample
 * carries its counters. */
enum { AW_ID, AW_SIZE, AW_META /* domain | flags << 8 */, AW_SLOT /* table index, or UINT32_MAX */, AW_N };
#define RS_ALLOC 0x80

/* ---- the profiled process (objects.c) ---- */

/* At agent setup, with --objects: the table, and the moment the hooks go
 * in (the interpreter running, the GIL held). Returns 0 or -1. */
int objects_setup(void);
/* A fork child: a fresh table in the child's region. */
int objects_fresh(void);
/* With the GIL held: hooks in if allocations are to be sampled now, out
 * if not. */
void objects_sync(void);
/* An agent loaded into a running process, at the end of its setup: the
 * same if this thread holds the GIL (else the audit hook does it). */
void objects_loaded(void);

/* ---- the helper (writer-objects.c) ---- */

struct wbuf;
struct rsample;
/* Writes a drained allocation sample. */
void wobj_put_alloc(struct wbuf *recs, const struct rsample *h, uint32_t stack, int64_t dt_ns);
/* Types learnt and blocks freed since the last pass; `final`: the
 * process is ending, read the type of every block still alive. */
void wobj_scan(struct wbuf *recs, int final);
/* A new stream: type indices start over. */
void wobj_reset(void);

#endif
