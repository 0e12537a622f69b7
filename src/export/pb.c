/*
 * pb.c — see pb.h.
 */
#include <stdlib.h>
#include <string.h>

#include "pb.h"

/* ---- protobuf encoding --------------------------------------------------- */

int pb_reserve(struct pb *b, size_t n)
{
	if (b->len + n <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n)
		cap *= 2;
	uint8_t *d = realloc(b->d, cap);
	if (!d) {
		b->oom = 1;
		return -1;
	}
	b->d = d;
	b->cap = cap;
	return 0;
}

void pb_varint(struct pb *b, uint64_t v)
{
	if (pb_reserve(b, 10))
		return;
	while (v >= 0x80) {
		b->d[b->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->d[b->len++] = (uint8_t)v;
}

void pb_key(struct pb *b, uint32_t field, uint32_t wt) { pb_varint(b, (uint64_t)field << 3 | wt); }

void pb_uint(struct pb *b, uint32_t field, uint64_t v)
{
	if (!v)
		return;
	pb_key(b, field, WT_VARINT);
	pb_varint(b, v);
}

void pb_bytes(struct pb *b, uint32_t field, const void *s, size_t n)
{
	pb_key(b, field, WT_LEN);
	pb_varint(b, n);
	if (n && !pb_reserve(b, n)) {
		memcpy(b->d + b->len, s, n);
		b->len += n;
	}
}

void pb_msg(struct pb *b, uint32_t field, struct pb *sub)
{
	if (sub->oom)
		b->oom = 1;
	pb_bytes(b, field, sub->d, sub->len);
	sub->len = 0;
}

/* ---- string table ------------------------------------------------------------ */


struct str_key {
	const struct strtab *t;
	const char *s;
};

static int str_eq(const void *ctx, uint32_t id)
{
	const struct str_key *k = ctx;
	return !strcmp(k->t->s[id], k->s);
}

int64_t str_id(struct strtab *t, const char *s)
{
	if (!s)
		s = "";
	uint64_t h = hash_bytes(s, strlen(s), 0x7072);
	struct str_key k = { t, s };
	uint32_t id = idmap_find(&t->map, h, str_eq, &k);
	if (id != MAP_NONE)
		return id;
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		const char **ns = realloc(t->s, (size_t)cap * sizeof(*ns));
		if (!ns) {
			t->oom = 1;
			return 0;
		}
		t->s = ns;
		t->cap = cap;
	}
	id = t->n;
	t->s[t->n++] = s;
	if (idmap_add(&t->map, h, id))
		t->oom = 1;
	return id;
}

void pb_fixed64(struct pb *b, uint32_t field, uint64_t v)
{
	if (!v)
		return;
	pb_key(b, field, WT_I64);
	if (pb_reserve(b, 8))
		return;
	for (int i = 0; i < 8; i++)
		b->d[b->len++] = (uint8_t)(v >> (8 * i));
}

void strtab_free(struct strtab *t)
{
	idmap_free(&t->map);
	free(t->s);
	memset(t, 0, sizeof(*t));
}
