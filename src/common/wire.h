/*
 * wire.h — the byte-level encoding shared by the agent (writer side) and the
 * CLI (reader side): a growable output buffer, LEB128 varints, length-
 * prefixed strings, and a bounds-checked input cursor that never reads past
 * its end (every decode error is sticky, so callers check once at the end).
 *
 * Nothing here is used from a signal handler: the agent's writer thread is
 * the only agent code that encodes.
 */
#ifndef STRATA_WIRE_H
#define STRATA_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* Growable output buffer. On allocation failure `oom` is set and further
 * writes are dropped; the caller checks `oom` before using the bytes. */
struct wbuf {
	uint8_t *data;
	size_t len, cap;
	int oom;
};

void wbuf_init(struct wbuf *b);
void wbuf_free(struct wbuf *b);
void wbuf_reset(struct wbuf *b);
int wbuf_reserve(struct wbuf *b, size_t extra);
void wbuf_put(struct wbuf *b, const void *p, size_t n);
void wbuf_u8(struct wbuf *b, uint8_t v);
void wbuf_le32(struct wbuf *b, uint32_t v);
void wbuf_le64(struct wbuf *b, uint64_t v);
void wbuf_uv(struct wbuf *b, uint64_t v);        /* unsigned LEB128 */
void wbuf_sv(struct wbuf *b, int64_t v);         /* zigzag + LEB128 */
void wbuf_str(struct wbuf *b, const char *s);    /* varint length + bytes, NULL = "" */
void wbuf_bytes(struct wbuf *b, const void *p, size_t n); /* varint length + bytes */

/* Bounded input cursor. Any read past the end sets `err` and returns 0 /
 * empty; decoding continues harmlessly and the caller checks `err`. */
struct rbuf {
	const uint8_t *p, *end;
	int err;
};

static inline void rbuf_init(struct rbuf *r, const void *p, size_t n)
{
	r->p = (const uint8_t *)p;
	r->end = n ? r->p + n : r->p; /* NULL + 0 is undefined: an empty buffer may have no storage */
	r->err = 0;
}
static inline size_t rbuf_left(const struct rbuf *r) { return (size_t)(r->end - r->p); }

uint8_t rbuf_u8(struct rbuf *r);
uint32_t rbuf_le32(struct rbuf *r);
uint64_t rbuf_le64(struct rbuf *r);
uint64_t rbuf_uv(struct rbuf *r);
int64_t rbuf_sv(struct rbuf *r);
/* Length-prefixed bytes: returns a pointer into the input (not NUL-
 * terminated) and its length; NULL/0 on error. */
const uint8_t *rbuf_bytes(struct rbuf *r, size_t *n);
/* Length-prefixed string copied into a new NUL-terminated heap string (embedded NULs are
 * kept as-is up to the first one). Returns NULL on error or OOM (err set). */
char *rbuf_strdup(struct rbuf *r);

uint32_t le32_at(const uint8_t *p);
uint64_t le64_at(const uint8_t *p);
void put_le32(uint8_t *p, uint32_t v);
void put_le64(uint8_t *p, uint64_t v);

/* CRC-32C (Castagnoli), software table; `crc` is the running value (start with 0). */
uint32_t crc32c(uint32_t crc, const void *p, size_t n);

#endif
