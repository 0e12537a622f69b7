/*
 * test_wire.c — varints, strings, the bounded input cursor and CRC-32C.
 */
#include "test.h"

#include "../../src/common/wire.h"

static void test_uvarint_roundtrip(void)
{
	static const uint64_t vals[] = { 0, 1, 127, 128, 255, 300, 16383, 16384, UINT32_MAX,
					 (uint64_t)UINT32_MAX + 1, UINT64_MAX / 2, UINT64_MAX };
	struct wbuf b;
	wbuf_init(&b);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		wbuf_uv(&b, vals[i]);
	struct rbuf r;
	rbuf_init(&r, b.data, b.len);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		CHECK_U64(rbuf_uv(&r), vals[i]);
	CHECK_EQ(r.err, 0);
	CHECK_EQ(rbuf_left(&r), 0);
	/* Sizes: 7 bits per byte. */
	wbuf_reset(&b);
	wbuf_uv(&b, 127);
	CHECK_EQ(b.len, 1);
	wbuf_reset(&b);
	wbuf_uv(&b, 128);
	CHECK_EQ(b.len, 2);
	wbuf_reset(&b);
	wbuf_uv(&b, UINT64_MAX);
	CHECK_EQ(b.len, 10);
	wbuf_free(&b);
}

static void test_svarint_roundtrip(void)
{
	static const int64_t vals[] = { 0, -1, 1, -64, 64, -65, INT32_MIN, INT32_MAX, INT64_MIN, INT64_MAX };
	struct wbuf b;
	wbuf_init(&b);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		wbuf_sv(&b, vals[i]);
	struct rbuf r;
	rbuf_init(&r, b.data, b.len);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		CHECK_EQ(rbuf_sv(&r), vals[i]);
	CHECK_EQ(r.err, 0);
	/* Zigzag: small magnitudes of either sign take one byte. */
	wbuf_reset(&b);
	wbuf_sv(&b, -64);
	CHECK_EQ(b.len, 1);
	wbuf_free(&b);
}

static void test_malformed_varints(void)
{
	/* Continuation bit on the last byte: runs off the end. */
	const uint8_t cut[] = { 0x80, 0x80 };
	struct rbuf r;
	rbuf_init(&r, cut, sizeof(cut));
	CHECK_U64(rbuf_uv(&r), 0);
	CHECK_EQ(r.err, 1);
	/* Eleven bytes: longer than any 64-bit value. */
	uint8_t longv[11];
	memset(longv, 0x80, sizeof(longv));
	longv[10] = 0;
	rbuf_init(&r, longv, sizeof(longv));
	rbuf_uv(&r);
	CHECK_EQ(r.err, 1);
	/* Errors are sticky: later reads return 0 even if bytes remain. */
	const uint8_t ok[] = { 0x80, 5, 6 };
	rbuf_init(&r, ok, 1);
	rbuf_uv(&r);
	CHECK_EQ(r.err, 1);
	r.end = ok + 3;
	CHECK_EQ(rbuf_u8(&r), 0);
	CHECK_EQ(r.err, 1);
}

static void test_strings(void)
{
	struct wbuf b;
	wbuf_init(&b);
	wbuf_str(&b, "héllo");
	wbuf_str(&b, NULL);
	wbuf_bytes(&b, "a\0b", 3);
	struct rbuf r;
	rbuf_init(&r, b.data, b.len);
	char *s = rbuf_strdup(&r);
	CHECK_STR(s, "héllo");
	free(s);
	s = rbuf_strdup(&r);
	CHECK_STR(s, "");
	free(s);
	size_t n;
	const uint8_t *p = rbuf_bytes(&r, &n);
	CHECK_EQ(n, 3);
	CHECK(p && memcmp(p, "a\0b", 3) == 0);
	CHECK_EQ(r.err, 0);
	/* A length past the end is an error and allocates nothing. */
	wbuf_reset(&b);
	wbuf_uv(&b, 1000);
	wbuf_put(&b, "xy", 2);
	rbuf_init(&r, b.data, b.len);
	CHECK(rbuf_strdup(&r) == NULL);
	CHECK_EQ(r.err, 1);
	wbuf_free(&b);
}

static void test_fixed_width(void)
{
	struct wbuf b;
	wbuf_init(&b);
	wbuf_le32(&b, 0x12345678u);
	wbuf_le64(&b, 0x0102030405060708ull);
	CHECK_EQ(b.data[0], 0x78);
	CHECK_EQ(b.data[4], 0x08);
	struct rbuf r;
	rbuf_init(&r, b.data, b.len);
	CHECK_U64(rbuf_le32(&r), 0x12345678u);
	CHECK_U64(rbuf_le64(&r), 0x0102030405060708ull);
	CHECK_EQ(rbuf_le32(&r), 0);
	CHECK_EQ(r.err, 1);
	wbuf_free(&b);
}

static void test_crc32c(void)
{
	/* The standard check value of CRC-32C. */
	CHECK_U64(crc32c(0, "123456789", 9), 0xE3069283u);
	/* Incremental use gives the same result. */
	uint32_t c = crc32c(0, "1234", 4);
	CHECK_U64(crc32c(c, "56789", 5), 0xE3069283u);
	CHECK_U64(crc32c(0, "", 0), 0);
}

static void test_wbuf_growth(void)
{
	struct wbuf b;
	wbuf_init(&b);
	for (int i = 0; i < 100000; i++)
		wbuf_u8(&b, (uint8_t)i);
	CHECK_EQ(b.len, 100000);
	CHECK_EQ(b.oom, 0);
	CHECK_EQ(b.data[99999], (uint8_t)99999);
	wbuf_reset(&b);
	CHECK_EQ(b.len, 0);
	wbuf_free(&b);
}

int main(void)
{
	RUN(test_uvarint_roundtrip);
	RUN(test_svarint_roundtrip);
	RUN(test_malformed_varints);
	RUN(test_strings);
	RUN(test_fixed_width);
	RUN(test_crc32c);
	RUN(test_wbuf_growth);
	return test_summary();
}
