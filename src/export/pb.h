/*
 * pb.h — the protobuf wire encoding, written by hand (it is small): what
 * the pprof (pprof.c) and OTLP profiles (otlp.c) exporters share. A
 * message is built in a `struct pb` buffer; an embedded message is built
 * in a buffer of its own and appended with pb_msg. Out of memory sets
 * `oom` and makes the rest no-ops. Also their string table (entry 0 is
 * "", every string once).
 */
#ifndef STRATA_PB_H
#define STRATA_PB_H

#include <stddef.h>
#include <stdint.h>

#include "lib/intern.h"

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2 };

struct pb {
	uint8_t *d;
	size_t len, cap;
	int oom;
};

int pb_reserve(struct pb *b, size_t n);
void pb_varint(struct pb *b, uint64_t v);
void pb_key(struct pb *b, uint32_t field, uint32_t wt);
/* Scalars equal to zero are the proto3 default and are left out. */
void pb_uint(struct pb *b, uint32_t field, uint64_t v);
/* A fixed64 field (left out when zero). */
void pb_fixed64(struct pb *b, uint32_t field, uint64_t v);
void pb_bytes(struct pb *b, uint32_t field, const void *s, size_t n);
/* Appends `sub` as an embedded message (field, length, bytes) and empties it. */
void pb_msg(struct pb *b, uint32_t field, struct pb *sub);

struct strtab {
	struct idmap map;
	const char **s;
	uint32_t n, cap;
	int oom;
};

/* The index of s in the table (added if new). The pointer is kept: every
 * string given must outlive the table. */
int64_t str_id(struct strtab *t, const char *s);
void strtab_free(struct strtab *t);

#endif
