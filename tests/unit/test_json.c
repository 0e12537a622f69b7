/*
 * test_json.c — the JSON writer: escaping, UTF-8 repair, numbers, layout
 * and misuse detection. Output is compared byte for byte.
 */
#include "test.h"

#include "../../src/lib/json.h"

/* Runs `body` against a writer on a memory stream and compares. */
#define JSON_CASE(inline_depth, expect_rc, expect, body)                       \
	do {                                                                   \
		char *buf_ = NULL;                                             \
		size_t len_ = 0;                                               \
		FILE *f_ = open_memstream(&buf_, &len_);                       \
		struct json j_;                                                \
		json_init(&j_, f_, inline_depth);                              \
		struct json *j = &j_;                                          \
		body;                                                          \
		int rc_ = json_finish(j);                                      \
		fclose(f_);                                                    \
		CHECK_EQ(rc_, expect_rc);                                      \
		if (expect)                                                    \
			CHECK_STR(buf_, (const char *)expect);                 \
		free(buf_);                                                    \
	} while (0)

static void test_escaping(void)
{
	JSON_CASE(0, 0, "\"quote \\\" backslash \\\\ slash /\"\n", json_string(j, "quote \" backslash \\ slash /"));
	JSON_CASE(0, 0, "\"\\n\\r\\t\\b\\f\\u0001\\u001f\x7f\"\n", json_string(j, "\n\r\t\b\f\x01\x1f\x7f"));
	/* Embedded NUL with an explicit length. */
	JSON_CASE(0, 0, "\"a\\u0000b\"\n", json_string_len(j, "a\0b", 3));
	JSON_CASE(0, 0, "null\n", json_string(j, NULL));
	/* Keys are escaped too. */
	JSON_CASE(0, 0, "{\"k\\\"ey\":1}\n", {
		json_object_begin(j);
		json_key(j, "k\"ey");
		json_int(j, 1);
		json_object_end(j);
	});
}

static void test_utf8(void)
{
	/* Valid multi-byte text passes through. */
	JSON_CASE(0, 0, "\"h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80\"\n", json_string(j, "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"));
	/* A lone continuation byte, a truncated sequence at the end, an
	 * overlong encoding, a surrogate, and a code point past U+10FFFF each
	 * become U+FFFD (one per maximal invalid subpart). */
	JSON_CASE(0, 0, "\"a\xEF\xBF\xBD" "b\"\n", json_string(j, "a\x80" "b"));
	JSON_CASE(0, 0, "\"a\xEF\xBF\xBD\"\n", json_string(j, "a\xE2\x82"));
	JSON_CASE(0, 0, "\"\xEF\xBF\xBD\xEF\xBF\xBD\"\n", json_string(j, "\xC0\xAF"));
	JSON_CASE(0, 0, "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"\n", json_string(j, "\xED\xA0\x80"));
	JSON_CASE(0, 0, "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"\n", json_string(j, "\xF4\x90\x80\x80"));
	JSON_CASE(0, 0, "\"\xEF\xBF\xBDz\"\n", json_string(j, "\xF0\x9F\x98z"));
	JSON_CASE(0, 0, "\"\xEF\xBF\xBD\"\n", json_string(j, "\xFF"));
}

static void test_numbers(void)
{
	JSON_CASE(0, 0, "[0,-1,9223372036854775807,-9223372036854775808,18446744073709551615]\n", {
		json_array_begin(j);
		json_int(j, 0);
		json_int(j, -1);
		json_int(j, INT64_MAX);
		json_int(j, INT64_MIN);
		json_uint(j, UINT64_MAX);
		json_array_end(j);
	});
	JSON_CASE(0, 0, "[0.1,1.5,-2,1e+300,0.3333333333333333,null,null]\n", {
		json_array_begin(j);
		json_double(j, 0.1);
		json_double(j, 1.5);
		json_double(j, -2.0);
		json_double(j, 1e300);
		json_double(j, 1.0 / 3.0);
		json_double(j, 1.0 / 0.0);
		json_double(j, 0.0 / 0.0);
		json_array_end(j);
	});
	JSON_CASE(0, 0, "[true,false,null]\n", {
		json_array_begin(j);
		json_bool(j, 1);
		json_bool(j, 0);
		json_null(j);
		json_array_end(j);
	});
}

static void test_layout(void)
{
	/* Fully compact. */
	JSON_CASE(0, 0, "{\"a\":[],\"b\":{},\"c\":[{\"x\":1,\"y\":[2,3]}]}\n", {
		json_object_begin(j);
		json_key(j, "a");
		json_array_begin(j);
		json_array_end(j);
		json_key(j, "b");
		json_object_begin(j);
		json_object_end(j);
		json_key(j, "c");
		json_array_begin(j);
		json_object_begin(j);
		json_key(j, "x");
		json_int(j, 1);
		json_key(j, "y");
		json_array_begin(j);
		json_int(j, 2);
		json_int(j, 3);
		json_array_end(j);
		json_object_end(j);
		json_array_end(j);
		json_object_end(j);
	});
	/* Report layout: top-level members and array elements one per line,
	 * rows on one line each. */
	JSON_CASE(2, 0, "{\n  \"n\": 1,\n  \"rows\": [\n    {\"x\": 1, \"y\": 2},\n    {\"x\": 3}\n  ],\n  \"e\": []\n}\n", {
		json_object_begin(j);
		json_key(j, "n");
		json_int(j, 1);
		json_key(j, "rows");
		json_array_begin(j);
		json_object_begin(j);
		json_key(j, "x");
		json_int(j, 1);
		json_key(j, "y");
		json_int(j, 2);
		json_object_end(j);
		json_object_begin(j);
		json_key(j, "x");
		json_int(j, 3);
		json_object_end(j);
		json_array_end(j);
		json_key(j, "e");
		json_array_begin(j);
		json_array_end(j);
		json_object_end(j);
	});
	/* Many members: the per-level count saturates but commas continue. */
	JSON_CASE(0, 0, NULL, {
		json_array_begin(j);
		for (int i = 0; i < 1000; i++)
			json_int(j, i);
		json_array_end(j);
	});
}

static void test_misuse(void)
{
	/* A value without a key inside an object. */
	JSON_CASE(0, -1, NULL, {
		json_object_begin(j);
		json_int(j, 1);
		json_object_end(j);
	});
	/* A key inside an array. */
	JSON_CASE(0, -1, NULL, {
		json_array_begin(j);
		json_key(j, "k");
		json_array_end(j);
	});
	/* Two keys in a row. */
	JSON_CASE(0, -1, NULL, {
		json_object_begin(j);
		json_key(j, "a");
		json_key(j, "b");
		json_int(j, 1);
		json_object_end(j);
	});
	/* Unbalanced, mismatched, dangling key, two top-level values, nothing. */
	JSON_CASE(0, -1, NULL, json_array_begin(j));
	JSON_CASE(0, -1, NULL, { json_array_begin(j); json_object_end(j); });
	JSON_CASE(0, -1, NULL, { json_object_begin(j); json_key(j, "a"); json_object_end(j); });
	JSON_CASE(0, -1, NULL, { json_int(j, 1); json_int(j, 2); });
	JSON_CASE(0, -1, NULL, (void)j);
	JSON_CASE(0, -1, NULL, json_array_end(j));
	/* Too deep. */
	JSON_CASE(0, -1, NULL, {
		for (int i = 0; i < JSON_MAX_DEPTH + 1; i++)
			json_array_begin(j);
	});
	/* Exactly as deep as allowed is fine. */
	JSON_CASE(0, 0, NULL, {
		for (int i = 0; i < JSON_MAX_DEPTH; i++)
			json_array_begin(j);
		for (int i = 0; i < JSON_MAX_DEPTH; i++)
			json_array_end(j);
	});
}

static void test_write_error(void)
{
	FILE *f = fopen("/dev/full", "w");
	if (!f)
		return;
	setvbuf(f, NULL, _IONBF, 0);
	struct json j;
	json_init(&j, f, 0);
	json_string(&j, "cannot be written");
	CHECK_EQ(json_finish(&j), -1);
	fclose(f);
}

int main(void)
{
	RUN(test_escaping);
	RUN(test_utf8);
	RUN(test_numbers);
	RUN(test_layout);
	RUN(test_misuse);
	RUN(test_write_error);
	return test_summary();
}
