/*
 * intern.c — hash tables and the string pool; see intern.h.
 */
#include "intern.h"

#include <stdlib.h>
#include <string.h>

/* splitmix64's finaliser: spreads sequential keys (indices, tids) over
 * the whole table. */
uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed)
{
	/* FNV-1a over 8-byte words where possible, finalised with hash_u64. */
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull ^ hash_u64(seed + n);
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, b, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
		b += 8;
		n -= 8;
	}
	while (n--)
		h = (h ^ *b++) * 0x100000001b3ull;
	return hash_u64(h);
}

/* ---- u64map ----------------------------------------------------------- */

void u64map_free(struct u64map *m)
{
	free(m->s);
	memset(m, 0, sizeof(*m));
}

uint32_t u64map_get(const struct u64map *m, uint64_t key)
{
	if (!m->cap)
		return MAP_NONE;
	uint32_t mask = m->cap - 1;
	for (uint32_t j = (uint32_t)hash_u64(key) & mask;; j = (j + 1) & mask) {
		const struct u64slot *e = &m->s[j];
		if (e->val == MAP_NONE)
			return MAP_NONE;
		if (e->key == key)
			return e->val;
	}
}

static int u64map_grow(struct u64map *m)
{
	uint32_t cap = m->cap ? m->cap * 2 : 64;
	if (cap < m->cap)
		return -1;
	struct u64slot *s = malloc((size_t)cap * sizeof(*s));
	if (!s)
		return -1;
	for (uint32_t i = 0; i < cap; i++)
		s[i].val = MAP_NONE;
	for (uint32_t i = 0; i < m->cap; i++) {
		if (m->s[i].val == MAP_NONE)
			continue;
		uint32_t j = (uint32_t)hash_u64(m->s[i].key) & (cap - 1);
		while (s[j].val != MAP_NONE)
			j = (j + 1) & (cap - 1);
		s[j] = m->s[i];
	}
	free(m->s);
	m->s = s;
	m->cap = cap;
	return 0;
}

int u64map_put(struct u64map *m, uint64_t key, uint32_t val)
{
	if ((uint64_t)(m->count + 1) * 4 > (uint64_t)m->cap * 3 && u64map_grow(m))
		return -1;
	uint32_t mask = m->cap - 1;
	uint32_t j = (uint32_t)hash_u64(key) & mask;
	while (m->s[j].val != MAP_NONE) {
		if (m->s[j].key == key) {
			m->s[j].val = val;
			return 0;
		}
		j = (j + 1) & mask;
	}
	m->s[j].key = key;
	m->s[j].val = val;
	m->count++;
	return 0;
}

/* ---- idmap ------------------------------------------------------------ */

void idmap_free(struct idmap *m)
{
	free(m->hash);
	free(m->ids);
	memset(m, 0, sizeof(*m));
}

uint32_t idmap_find(const struct idmap *m, uint64_t hash, idmap_eq_fn eq, const void *ctx)
{
	if (!m->cap)
		return MAP_NONE;
	hash |= 1;
	uint32_t mask = m->cap - 1;
	for (uint32_t j = (uint32_t)hash & mask;; j = (j + 1) & mask) {
		if (!m->hash[j])
			return MAP_NONE;
		if (m->hash[j] == hash && eq(ctx, m->ids[j]))
			return m->ids[j];
	}
}

static int idmap_grow(struct idmap *m)
{
	uint32_t cap = m->cap ? m->cap * 2 : 64;
	if (cap < m->cap)
		return -1;
	uint64_t *hash = calloc(cap, sizeof(*hash));
	uint32_t *ids = malloc((size_t)cap * sizeof(*ids));
	if (!hash || !ids) {
		free(hash);
		free(ids);
		return -1;
	}
	for (uint32_t i = 0; i < m->cap; i++) {
		if (!m->hash[i])
			continue;
		uint32_t j = (uint32_t)m->hash[i] & (cap - 1);
		while (hash[j])
			j = (j + 1) & (cap - 1);
		hash[j] = m->hash[i];
		ids[j] = m->ids[i];
	}
	free(m->hash);
	free(m->ids);
	m->hash = hash;
	m->ids = ids;
	m->cap = cap;
	return 0;
}

int idmap_add(struct idmap *m, uint64_t hash, uint32_t id)
{
	if ((uint64_t)(m->count + 1) * 4 > (uint64_t)m->cap * 3 && idmap_grow(m))
		return -1;
	hash |= 1;
	uint32_t mask = m->cap - 1;
	uint32_t j = (uint32_t)hash & mask;
	while (m->hash[j])
		j = (j + 1) & mask;
	m->hash[j] = hash;
	m->ids[j] = id;
	m->count++;
	return 0;
}

/* ---- strpool ------------------------------------------------------------ */

#define BLOCK_SIZE (64u << 10)

void strpool_free(struct strpool *sp)
{
	char *b = sp->block;
	while (b) {
		char *next;
		memcpy(&next, b, sizeof(next));
		free(b);
		b = next;
	}
	free(sp->strs);
	idmap_free(&sp->map);
	memset(sp, 0, sizeof(*sp));
}

struct str_key {
	const struct strpool *sp;
	const char *s;
	size_t len;
};

static int str_eq(const void *ctx, uint32_t id)
{
	const struct str_key *k = ctx;
	const char *t = k->sp->strs[id];
	return strncmp(t, k->s, k->len) == 0 && t[k->len] == 0;
}

static char *pool_alloc(struct strpool *sp, size_t n)
{
	if (!sp->block || sp->size - sp->used < n) {
		size_t size = n + sizeof(char *) > BLOCK_SIZE ? n + sizeof(char *) : BLOCK_SIZE;
		char *b = malloc(size);
		if (!b)
			return NULL;
		memcpy(b, &sp->block, sizeof(char *));
		sp->block = b;
		sp->used = sizeof(char *);
		sp->size = size;
	}
	char *p = sp->block + sp->used;
	sp->used += n;
	return p;
}

const char *strpool_intern(struct strpool *sp, const char *s, size_t len)
{
	/* A string read from a file may hold NULs: it ends at the first. */
	const char *nul = memchr(s, 0, len);
	if (nul)
		len = (size_t)(nul - s);
	struct str_key k = { sp, s, len };
	uint64_t h = hash_bytes(s, len, 0);
	uint32_t id = idmap_find(&sp->map, h, str_eq, &k);
	if (id != MAP_NONE)
		return sp->strs[id];
	if (sp->n == sp->cap) {
		uint32_t cap = sp->cap ? sp->cap * 2 : 256;
		const char **strs = realloc(sp->strs, (size_t)cap * sizeof(*strs));
		if (!strs)
			return NULL;
		sp->strs = strs;
		sp->cap = cap;
	}
	char *copy = pool_alloc(sp, len + 1);
	if (!copy)
		return NULL;
	memcpy(copy, s, len);
	copy[len] = 0;
	if (idmap_add(&sp->map, h, sp->n))
		return NULL;
	sp->strs[sp->n++] = copy;
	return copy;
}
