/*
 * mkcorpus.c — the .strata side of the fuzzers' seed corpus, run by
 * tests/fuzz/mkcorpus.py (which makes the whole corpus; see there):
 *
 *	mkcorpus DIR [NAME=]FILE.strata...   each file (NAME-file, or
 *		file-N; native modules moved to where no file is, see
 *		MODULE_ROOT), the same file as "piece" input (0x01, then each
 *		chunk's decompressed records; see pieces.h), and synthetic-1,
 *		records that reach what small real files rarely contain
 *		(marker frames, lost stacks, events, continued and unsupported
 *		processes, unknown record types);
 *	mkcorpus --jit-images DIR PREFIX FILE.strata   the ELF image of each
 *		REC_JIT_IMAGE, as DIR/PREFIX-N;
 *	mkcorpus --bodies TYPE DIR PREFIX FILE.strata  the body of each record
 *		of TYPE (a number), as DIR/PREFIX-N.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/synth.h"
#include "../../src/lib/reader.h"

#define MAX_SEED 65536 /* the fuzzers' -max_len */

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

/* Where a recording's native modules are said to be in the seeds: under a
 * directory that exists nowhere, so that loading a seed reads no file of
 * the machine (which made each run take seconds, and its result depend on
 * what is installed), and without their build ids, by which the symbolizer
 * would find their debug files. "[vdso]" and the like keep their names. */
#define MODULE_ROOT "/strata-fuzz-seed"

static void rewrite_modules(struct wbuf *file)
{
	struct wbuf out, raw, recs;
	wbuf_init(&out);
	wbuf_init(&raw);
	wbuf_init(&recs);
	wbuf_put(&out, file->data, STRATA_FILE_HDR_SIZE);
	size_t off = STRATA_FILE_HDR_SIZE;
	struct chunk_header h;
	while (off + STRATA_CHUNK_HDR_SIZE <= file->len && chunk_header_parse(file->data + off, &h) == FMT_OK &&
	       off + STRATA_CHUNK_HDR_SIZE + h.stored_size <= file->len) {
		if (chunk_open(&h, file->data + off + STRATA_CHUNK_HDR_SIZE, &raw) == FMT_OK) {
			struct rbuf in, body;
			rbuf_init(&in, raw.data, raw.len);
			uint64_t type;
			wbuf_reset(&recs);
			while (rec_next(&in, &type, &body) == 1) {
				struct rec_module m;
				struct rbuf b = body;
				if (type == REC_MODULE && rec_get_module(&b, &m) == 0) {
					if (m.path && m.path[0] == '/') {
						char *np = malloc(strlen(m.path) + sizeof(MODULE_ROOT));
						sprintf(np, MODULE_ROOT "%s", m.path);
						free(m.path);
						m.path = np;
					}
					/* Nor found by its build id (/usr/lib/debug). */
					m.build_id_len = 0;
					rec_put_module(&recs, &m);
					rec_free_module(&m);
				} else {
					rec_put_raw(&recs, (uint32_t)type, body.p, rbuf_left(&body));
				}
			}
			chunk_seal(&out, recs.data, recs.len, h.stream, h.seq, h.flags, 3);
		}
		off += STRATA_CHUNK_HDR_SIZE + h.stored_size;
	}
	wbuf_free(file);
	*file = out;
	wbuf_free(&raw);
	wbuf_free(&recs);
}

static int convert(const char *dir, const char *arg, int idx)
{
	const char *eq = strchr(arg, '=');
	const char *path = eq ? eq + 1 : arg;
	char prefix[48];
	snprintf(prefix, sizeof(prefix), "%.*s", eq ? (int)(eq - arg) : 0, arg);
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
	rewrite_modules(&in);
	char name[128];
	/* A file over the fuzzers' 64 KiB is cut after its last whole chunk
	 * that fits: what a recording killed there would have left. */
	size_t keep = in.len, off = STRATA_FILE_HDR_SIZE;
	if (keep > MAX_SEED) {
		keep = off;
		struct chunk_header h;
		while (off + STRATA_CHUNK_HDR_SIZE <= in.len && chunk_header_parse(in.data + off, &h) == FMT_OK &&
		       off + STRATA_CHUNK_HDR_SIZE + h.stored_size <= MAX_SEED) {
			off += STRATA_CHUNK_HDR_SIZE + h.stored_size;
			keep = off;
		}
	}
	if (eq)
		snprintf(name, sizeof(name), "%s-file", prefix);
	else
		snprintf(name, sizeof(name), "file-%d", idx);
	write_file(dir, name, in.data, keep);
	uint64_t ids[256];
	int nids = 0;
	wbuf_u8(&out, 0x01);
	off = STRATA_FILE_HDR_SIZE;
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
			/* Chunks that would take the seed over 64 KiB are left out. */
			if (out.len + raw.len + 4 * (raw.len / 65535 + 1) <= MAX_SEED)
				piece(&out, (uint8_t)s, (uint8_t)h.flags, raw.data, raw.len);
		}
		off += STRATA_CHUNK_HDR_SIZE + h.stored_size;
	}
	if (eq)
		snprintf(name, sizeof(name), "%s-pieces", prefix);
	else
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

/* --jit-images and --bodies: records of one type out of a file. */
struct extract {
	const char *dir, *prefix;
	uint64_t type;
	int images, n;
};

static int extract_one(void *ctx, struct reader_stream *st, uint64_t type, struct rbuf *body)
{
	(void)st;
	struct extract *x = ctx;
	if (type != x->type)
		return 0;
	char name[128];
	snprintf(name, sizeof(name), "%s-%d", x->prefix, ++x->n);
	if (!x->images)
		return write_file(x->dir, name, body->p, rbuf_left(body)) ? -1 : 0;
	struct rec_jit_image ji;
	if (rec_get_jit_image(body, &ji))
		return 0;
	int rc = write_file(x->dir, name, ji.image, ji.image_len) ? -1 : 0;
	rec_free_jit_image(&ji);
	return rc;
}

static int extract(const char *dir, const char *prefix, const char *path, uint64_t type, int images)
{
	char err[512];
	struct reader *r = reader_open(path, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "mkcorpus: %s: %s\n", path, err);
		return 1;
	}
	struct extract x = { dir, prefix, type, images, 0 };
	int rc = reader_poll(r, 1, extract_one, &x, err, sizeof(err));
	reader_close(r);
	return rc != 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "--jit-images"))
		return extract(argv[2], argv[3], argv[4], REC_JIT_IMAGE, 1);
	if (argc == 6 && !strcmp(argv[1], "--bodies"))
		return extract(argv[3], argv[4], argv[5], strtoull(argv[2], NULL, 10), 0);
	if (argc < 2) {
		fprintf(stderr, "usage: mkcorpus DIR [NAME=]FILE.strata... | --jit-images DIR PREFIX FILE"
				" | --bodies TYPE DIR PREFIX FILE\n");
		return 2;
	}
	int rc = 0;
	for (int i = 2; i < argc; i++)
		rc |= convert(argv[1], argv[i], i - 1) != 0;
	synthetic(argv[1]);
	return rc;
}
