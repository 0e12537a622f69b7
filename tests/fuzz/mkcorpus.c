/*
 * mkcorpus.c — writes the fuzzer's seed corpus (tests/fuzz/corpus/):
 * each given .strata file as it is, the same file as "piece" input (0x01,
 * then each chunk's decompressed records; see fuzz_reader.c), and a few
 * synthetic inputs that reach what small real files rarely contain
 * (marker frames, lost stacks, events, continued and unsupported
 * processes, unknown record types). Rerun by hand when the format changes:
 *
 *	make build/fuzz/mkcorpus
 *	build/fuzz/mkcorpus tests/fuzz/corpus tests/unit/fixtures/small.strata ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/synth.h"

static int write_file(const char *dir, const char *name, const void *d, size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(d, 1, n, f) != n || fclose(f)) {
		perror(path);
		return -1;
	}
	printf("%s (%zu bytes)\n", path, n);
	return 0;
}

/* Appends one piece: stream, flags, 16-bit length, payload (split if long). */
static void piece(struct wbuf *out, uint8_t stream, uint8_t flags, const uint8_t *p, size_t n)
{
	do {
		size_t len = n > 65535 ? 65535 : n;
		uint8_t h[4] = { stream, n > 65535 ? 0 : flags, (uint8_t)len, (uint8_t)(len >> 8) };
		wbuf_put(out, h, 4);
		wbuf_put(out, p, len);
		p += len;
		n -= len;
	} while (n);
}

static int convert(const char *dir, const char *path, int idx)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	struct wbuf in, out, raw;
	wbuf_init(&in);
	wbuf_init(&out);
	wbuf_init(&raw);
	uint8_t buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		wbuf_put(&in, buf, n);
	fclose(f);
	char name[64];
	if (in.len <= 65536) {
		snprintf(name, sizeof(name), "file-%d", idx);
		write_file(dir, name, in.data, in.len);
	}
	uint64_t ids[256];
	int nids = 0;
	wbuf_u8(&out, 0x01);
	size_t off = STRATA_FILE_HDR_SIZE;
	while (off + STRATA_CHUNK_HDR_SIZE <= in.len) {
		struct chunk_header h;
		if (chunk_header_parse(in.data + off, &h) != FMT_OK ||
		    off + STRATA_CHUNK_HDR_SIZE + h.stored_size > in.len)
			break;
		if (chunk_open(&h, in.data + off + STRATA_CHUNK_HDR_SIZE, &raw) == FMT_OK) {
			int s;
			for (s = 0; s < nids && ids[s] != h.stream; s++)
				;
			if (s == nids && nids < 255)
				ids[nids++] = h.stream;
			piece(&out, (uint8_t)s, (uint8_t)h.flags, raw.data, raw.len);
		}
		off += STRATA_CHUNK_HDR_SIZE + h.stored_size;
	}
	snprintf(name, sizeof(name), "pieces-%d", idx);
	write_file(dir, name, out.data, out.len);
	wbuf_free(&in);
	wbuf_free(&out);
	wbuf_free(&raw);
	return 0;
}

/* Records covering the model's rarer paths, as pieces. */
static void synthetic(const char *dir)
{
	struct wbuf out, r;
	wbuf_init(&out);
	wbuf_init(&r);
	wbuf_u8(&out, 0x01);

	char *argv[] = { "python3", "app.py" };
	char *events[] = { "cycles" };
	struct rec_session se = { .strata_version = "x", .start_mono_ns = 100, .argc = 2, .argv = argv,
				  .mode = MODE_WALL, .rate_hz = 100, .nevents = 1, .events = events, .hostname = "h" };
	rec_put_session(&r, &se);
	piece(&out, 0, 0, r.data, r.len);
	wbuf_reset(&r);

	struct rec_process pr = { .pid = 10, .start_mono_ns = 200, .python_version = "3.11.2", .executable = "py",
				  .argc = 2, .argv = argv, .mode = MODE_WALL, .rate_hz = 100, .period_ns = 10000000 };
	rec_put_process(&r, &pr);
	struct rec_thread th = { .tid = 10, .flags = THREAD_MAIN, .name = "MainThread" };
	rec_put_thread(&r, &th);
	static const uint8_t lnotab[] = { 0, 1, 4, 1, 6, 0xfe }, loc[] = { 0x80 | 14 << 3 | 1, 3, 0, 5, 9, 0xf8, 0xd8, 1, 2 };
	struct rec_code c1 = { .index = 0, .firstlineno = 1, .linetable_fmt = LT_LNOTAB, .filename = "a.py",
			       .name = "main", .qualname = "main", .linetable = (uint8_t *)lnotab,
			       .linetable_len = sizeof(lnotab) };
	struct rec_code c2 = { .index = 1, .firstlineno = 10, .linetable_fmt = LT_LOCATIONS, .filename = "a.py",
			       .name = "f", .qualname = "C.f", .linetable = (uint8_t *)loc, .linetable_len = sizeof(loc) };
	rec_put_code(&r, &c1);
	rec_put_code(&r, &c2);
	struct rec_pyframe py[3] = { { 1, 2, 0 }, { 1, 0, 0 }, { 0, -1, PYF_ENTRY } };
	struct rec_stack s0 = { .index = 0, .npy = 3, .py = py };
	struct rec_stack s1 = { .index = 1, .flags = STACK_PY_TRUNCATED, .npy = 2, .py = py, .py_missing = 40 };
	struct rec_stack s2 = { .index = 2, .flags = STACK_PY_FAULT };
	struct rec_stack s3 = { .index = 3 };
	uint64_t nat[2] = { 0x401000, 0x402000 };
	struct rec_stack s4 = { .index = 4, .npy = 1, .py = py, .nnative = 2, .native = nat };
	rec_put_stack(&r, &s0);
	rec_put_stack(&r, &s1);
	rec_put_stack(&r, &s2);
	rec_put_stack(&r, &s3);
	rec_put_stack(&r, &s4);
	for (uint32_t i = 0; i < 7; i++) {
		struct rec_sample sm = { .tid = 10 + (i & 1), .dt_ns = 1000 - (int64_t)i * 300, .stack = i,
					 .weight = 1 + i, .flags = i & 1 ? SAMPLE_IDLE : 0, .ncounters = 1,
					 .counters = { 100 * i } };
		rec_put_sample(&r, &sm);
	}
	struct rec_thread_name tn = { 11, "renamed" };
	rec_put_thread_name(&r, &tn);
	struct rec_dropped dr = { 10, 3 };
	rec_put_dropped(&r, &dr);
	rec_put_raw(&r, 99, "future", 6);
	struct rec_thread_end te = { .tid = 11, .end_mono_ns = 5000, .dropped = 4 };
	rec_put_thread_end(&r, &te);
	struct rec_process_end pe = { .end_mono_ns = 6000, .reason = END_EXEC, .dropped = 9 };
	rec_put_process_end(&r, &pe);
	piece(&out, 1, CHUNK_LAST, r.data, r.len);
	wbuf_reset(&r);

	/* The same pid after a failed exec, and an unsupported Python. */
	pr.flags = PROC_CONTINUED;
	rec_put_process(&r, &pr);
	rec_put_code(&r, &c1);
	rec_put_stack(&r, &s0);
	struct rec_sample sm = { .tid = 10, .dt_ns = 5, .stack = 0, .weight = 1 };
	rec_put_sample(&r, &sm);
	piece(&out, 2, CHUNK_LAST, r.data, r.len);
	wbuf_reset(&r);
	pr.flags = PROC_UNSUPPORTED;
	pr.pid = 20;
	rec_put_process(&r, &pr);
	rec_put_sample(&r, &sm);
	piece(&out, 3, 0, r.data, r.len);
	wbuf_reset(&r);

	/* A stream whose first chunk was lost: no process record. */
	sm.stack = 3;
	rec_put_sample(&r, &sm);
	piece(&out, 4, CHUNK_LAST, r.data, r.len);
	wbuf_reset(&r);
	struct rec_session_end sen = { .end_mono_ns = 9000, .status = -9 };
	rec_put_session_end(&r, &sen);
	piece(&out, 0, CHUNK_LAST, r.data, r.len);
	write_file(dir, "synthetic-1", out.data, out.len);
	wbuf_free(&out);
	wbuf_free(&r);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: mkcorpus DIR [FILE.strata...]\n");
		return 2;
	}
	int rc = 0;
	for (int i = 2; i < argc; i++)
		rc |= convert(argv[1], argv[i], i - 1) != 0;
	synthetic(argv[1]);
	return rc;
}
