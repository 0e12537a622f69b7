/*
 * intern.h — the hash tables and string pool the profile model interns
 * with. Two shapes cover every use:
 *
 *   u64map  exact 64-bit key → 32-bit value (call-tree edges (parent,
 *           frame), per-stream code and stack indices, (process, tid))
 *   idmap   caller-hashed key → 32-bit id, equality decided by a callback
 *           that looks at the caller's own array (functions, frames,
 *           strings): the table stores no copy of the key
 *
 * Open addressing with linear probing, power-of-two capacity, at most 3/4
 * full; no deletion (the model only grows). Allocation failure is reported,
 * never fatal.
 */
#ifndef STRATA_INTERN_H
#define STRATA_INTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAP_NONE UINT32_MAX

/* Key and value share a slot so that a probe touches one cache line: the
 * call-tree map holds millions of entries and is probed for every frame. */
struct u64slot {
	uint64_t key;
	uint32_t val;    /* MAP_NONE marks an empty slot */
};

struct u64map {
	struct u64slot *s;
	uint32_t cap, count;
};

void u64map_free(struct u64map *m);
/* The value stored for key, or MAP_NONE. */
uint32_t u64map_get(const struct u64map *m, uint64_t key);
/* Inserts or overwrites; val must not be MAP_NONE. Returns 0 or -1 (OOM). */
int u64map_put(struct u64map *m, uint64_t key, uint32_t val);

struct idmap {
	uint64_t *hash;  /* 0 marks an empty slot (hashes are forced odd) */
	uint32_t *ids;
	uint32_t cap, count;
};

typedef int (*idmap_eq_fn)(const void *ctx, uint32_t id);
void idmap_free(struct idmap *m);
/* The id whose key hashes to `hash` and for which eq(ctx, id) is true, or
 * MAP_NONE. */
uint32_t idmap_find(const struct idmap *m, uint64_t hash, idmap_eq_fn eq, const void *ctx);
/* Adds id under hash (the caller checked it is absent). 0 or -1 (OOM). */
int idmap_add(struct idmap *m, uint64_t hash, uint32_t id);

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);
uint64_t hash_u64(uint64_t x);

/* Interned NUL-terminated strings with stable addresses, freed all at once. */
struct strpool {
	struct idmap map;
	const char **strs;
	uint32_t n, cap;
	char *block;     /* current block; blocks are chained through their first bytes */
	size_t used, size;
};

void strpool_free(struct strpool *sp);
/* Returns the pool's copy of s[0..len) (NULs inside are kept up to the
 * first), or NULL on OOM. */
const char *strpool_intern(struct strpool *sp, const char *s, size_t len);
/* Same for a C string (NULL = ""). */
static inline const char *strpool_str(struct strpool *sp, const char *s)
{
	return strpool_intern(sp, s ? s : "", s ? strlen(s) : 0);
}

#endif
