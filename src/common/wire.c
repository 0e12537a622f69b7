/*
 * wire.c — varints, buffers and CRC-32C; see wire.h.
 */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

void wbuf_init(struct wbuf *b) { memset(b, 0, sizeof(*b)); }

void wbuf_free(struct wbuf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void wbuf_reset(struct wbuf *b)
{
	b->len = 0;
	b->oom = 0;
}

int wbuf_reserve(struct wbuf *b, size_t extra)
{
	if (b->oom)
		return -1;
	if (b->len + extra <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra)
		cap *= 2;
	uint8_t *n = realloc(b->data, cap);
	if (!n) {
		b->oom = 1;
		return -1;
	}
	b->data = n;
	b->cap = cap;
	return 0;
}

void wbuf_put(struct wbuf *b, const void *p, size_t n)
{
	if (n == 0 || wbuf_reserve(b, n))
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void wbuf_u8(struct wbuf *b, uint8_t v) { wbuf_put(b, &v, 1); }

void wbuf_le32(struct wbuf *b, uint32_t v)
{
	uint8_t t[4];
	put_le32(t, v);
	wbuf_put(b, t, 4);
}

void wbuf_le64(struct wbuf *b, uint64_t v)
{
	uint8_t t[8];
	put_le64(t, v);
	wbuf_put(b, t, 8);
}

void wbuf_uv(struct wbuf *b, uint64_t v)
{
	uint8_t t[10];
	int n = 0;
	do {
		uint8_t c = v & 0x7f;
		v >>= 7;
		t[n++] = c | (v ? 0x80 : 0);
	} while (v);
	wbuf_put(b, t, (size_t)n);
}

void wbuf_sv(struct wbuf *b, int64_t v)
{
	wbuf_uv(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void wbuf_bytes(struct wbuf *b, const void *p, size_t n)
{
	wbuf_uv(b, n);
	wbuf_put(b, p, n);
}

void wbuf_str(struct wbuf *b, const char *s)
{
	wbuf_bytes(b, s ? s : "", s ? strlen(s) : 0);
}

uint8_t rbuf_u8(struct rbuf *r)
{
	if (r->err || r->p >= r->end) {
		r->err = 1;
		return 0;
	}
	return *r->p++;
}

uint32_t rbuf_le32(struct rbuf *r)
{
	if (r->err || rbuf_left(r) < 4) {
		r->err = 1;
		return 0;
	}
	uint32_t v = le32_at(r->p);
	r->p += 4;
	return v;
}

uint64_t rbuf_le64(struct rbuf *r)
{
	if (r->err || rbuf_left(r) < 8) {
		r->err = 1;
		return 0;
	}
	uint64_t v = le64_at(r->p);
	r->p += 8;
	return v;
}

uint64_t rbuf_uv(struct rbuf *r)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (r->err || r->p >= r->end) {
			r->err = 1;
			return 0;
		}
		uint8_t c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	r->err = 1; /* more than 10 bytes: malformed */
	return 0;
}

int64_t rbuf_sv(struct rbuf *r)
{
	uint64_t u = rbuf_uv(r);
	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

const uint8_t *rbuf_bytes(struct rbuf *r, size_t *n)
{
	uint64_t len = rbuf_uv(r);
	if (r->err || len > rbuf_left(r)) {
		r->err = 1;
		*n = 0;
		return NULL;
	}
	const uint8_t *p = r->p;
	r->p += len;
	*n = (size_t)len;
	return p;
}

char *rbuf_strdup(struct rbuf *r)
{
	size_t n;
	const uint8_t *p = rbuf_bytes(r, &n);
	if (r->err)
		return NULL;
	char *s = malloc(n + 1);
	if (!s) {
		r->err = 1;
		return NULL;
	}
	if (n)
		memcpy(s, p, n);
	s[n] = 0;
	return s;
}

uint32_t le32_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t le64_at(const uint8_t *p) { return (uint64_t)le32_at(p) | (uint64_t)le32_at(p + 4) << 32; }

void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

/* Table built on first use; the agent calls crc32c only from its writer
 * thread, after crc32c_init() ran in its constructor, so the lazy build is
 * never raced. */
static uint32_t crc_table[256];
static int crc_ready;

static void crc32c_build(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
	crc_ready = 1;
}

uint32_t crc32c(uint32_t crc, const void *data, size_t n)
{
	if (!crc_ready)
		crc32c_build();
	const uint8_t *p = data;
	crc = ~crc;
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}
