/*
 * fuzz_reader.c — libFuzzer target for everything that reads a .strata
 * file: the reader, profile ingestion (whole and incremental), aggregation
 * with filters, the JSON writer, and `strata report` itself (text and
 * --json), all on arbitrary bytes. Built and run by `make fuzz`.
 *
 * Inputs come in two shapes:
 *  - a file as it is (anything not starting with 0x01): exercises the
 *    header, chunk framing, checksums, decompression and resync;
 *  - 0x01 then pieces [stream u8][flags u8][len u16 LE][payload], each
 *    sealed here into an uncompressed chunk with a correct checksum: the
 *    fuzzer's mutations then reach the record decoders and the model
 *    instead of dying at the CRC. tests/fuzz/mkcorpus.c writes seeds of
 *    both shapes.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/cli/builtin.h"
#include "../../src/common/format.h"
#include "../../src/lib/json.h"
#include "../../src/lib/profile.h"
#include "../../src/lib/reader.h"

/* main.c's helpers, which builtin-report.c uses; silent here. */
void errorf(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
}

void warnf(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
}

void die_usage(const char *u)
{
	(void)u;
	abort(); /* the harness never passes bad options */
}

const char *agent_dir(void) { return NULL; }

static int memfd = -1;
static FILE *sink;
static struct wbuf file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create("fuzz", 0);
	sink = fopen("/dev/null", "w");
	/* The report prints to stdout. */
	if (!freopen("/dev/null", "w", stdout))
		abort();
	wbuf_init(&file);
	return 0;
}

/* Shape 2: seal each piece as a valid uncompressed chunk. */
static void build_chunks(const uint8_t *d, size_t n)
{
	uint8_t hdr[STRATA_FILE_HDR_SIZE];
	struct file_header fh = { .major = STRATA_FMT_MAJOR, .minor = STRATA_FMT_MINOR };
	file_header_pack(hdr, &fh);
	wbuf_put(&file, hdr, sizeof(hdr));
	uint32_t seq[256] = { 0 };
	size_t i = 0;
	while (i + 4 <= n) {
		uint8_t stream = d[i], flags = d[i + 1];
		size_t len = (size_t)d[i + 2] | (size_t)d[i + 3] << 8;
		i += 4;
		if (len > n - i)
			len = n - i;
		struct chunk_header h = { .stream = 1000u + stream, .seq = seq[stream]++, .codec = CODEC_NONE,
					  .flags = flags & CHUNK_LAST, .raw_size = (uint32_t)len,
					  .stored_size = (uint32_t)len, .payload_crc = crc32c(0, d + i, len) };
		uint8_t ch[STRATA_CHUNK_HDR_SIZE];
		chunk_header_pack(ch, &h);
		wbuf_put(&file, ch, sizeof(ch));
		wbuf_put(&file, d + i, len);
		i += len;
	}
}

static void set_file(const uint8_t *d, size_t n)
{
	if (ftruncate(memfd, 0) || (n && pwrite(memfd, d, n, 0) != (ssize_t)n) || lseek(memfd, 0, SEEK_SET))
		abort();
}

/* Walks the model the way exporters will: every row, a few stacks. */
static void use_model(const struct profile *p)
{
	struct agg_filter filters[4] = { { 0 } };
	filters[1].exclude_idle = 1;
	if (p->nthreads) {
		filters[2].tid = p->threads[p->nthreads - 1].tid;
		filters[3].pid = p->threads[0].pid;
	}
	filters[3].first_sample = p->nsamples / 2;
	filters[3].t0 = p->start_ns;
	filters[3].t1 = p->end_ns;
	for (int k = 0; k < 4; k++) {
		struct agg *a = profile_aggregate(p, &filters[k], (uint32_t)k % (p->nevents ? p->nevents : 1));
		if (!a)
			continue;
		if (k == 1)
			agg_sort(a, 0, 1);
		struct json j;
		json_init(&j, sink, k);
		json_object_begin(&j);
		json_key(&j, "rows");
		json_array_begin(&j);
		for (uint32_t i = 0; i < a->nfuncs; i++) {
			const struct pfunc *f = &p->funcs[a->funcs[i].func];
			/* Invariants every consumer relies on. */
			if (a->funcs[i].self[0] > a->funcs[i].total[0] || a->funcs[i].total[0] > a->totals[0])
				abort();
			json_object_begin(&j);
			json_key(&j, "name");
			json_string(&j, f->name);
			json_key(&j, "file");
			json_string(&j, f->file);
			json_key(&j, "kind");
			json_string(&j, pkind_name(f->kind));
			json_key(&j, "self");
			json_uint(&j, a->funcs[i].self[0]);
			json_object_end(&j);
		}
		for (uint32_t i = 0; i < a->nlines; i++)
			if (a->lines[i].self[0] > a->lines[i].total[0] || a->lines[i].total[0] > a->totals[0])
				abort();
		json_array_end(&j);
		json_key(&j, "share");
		json_double(&j, p->totals[0] ? (double)a->totals[0] / (double)p->totals[0] : 0.0);
		json_object_end(&j);
		if (json_finish(&j))
			abort(); /* balanced by construction */
		agg_free(a);
	}
	uint32_t fr[64];
	for (uint64_t i = 0; i < p->nsamples && i < 8; i++) {
		uint32_t d = profile_stack(p, p->samples[i].node, fr, 64);
		if (d != p->nodes[p->samples[i].node].depth)
			abort();
		for (uint32_t k = 0; k < d && k < 64; k++)
			if (fr[k] >= p->nframes)
				abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	wbuf_reset(&file);
	if (size && data[0] == 0x01)
		build_chunks(data + 1, size - 1);
	else
		wbuf_put(&file, data, size);
	if (file.oom)
		return 0;
	char err[512];

	/* Whole file. */
	set_file(file.data, file.len);
	struct reader *r = reader_open_fd(memfd, err, sizeof(err));
	if (r) {
		struct profile *p = profile_new(NULL);
		if (p && profile_ingest(p, r, 1, err, sizeof(err)) == 0)
			use_model(p);
		profile_free(p);
		reader_close(r);
	}

	/* Each input also takes one of three other paths (chosen by its
	 * length, so a mutation that changes it explores another): every path
	 * re-parses the file, and doing all three per input would triple the
	 * time per execution for little new coverage. */
	int which = (int)(size % 3);

	/* Incrementally: half, then the rest, as the live view reads. */
	size_t half = file.len / 2;
	if (which == 0) {
		set_file(file.data, half);
		r = reader_open_fd(memfd, err, sizeof(err));
		if (r) {
			struct profile *p = profile_new(NULL);
			int ok = p && profile_ingest(p, r, 0, err, sizeof(err)) == 0;
			if (ok && pwrite(memfd, file.data + half, file.len - half, (off_t)half) !=
					  (ssize_t)(file.len - half))
				abort();
			if (ok && profile_ingest(p, r, 1, err, sizeof(err)) == 0)
				use_model(p);
			profile_free(p);
			reader_close(r);
		}
	}

	/* The report command, as a user runs it (the memory file holds the
	 * whole input again). */
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
	char *text[] = { "report", "--limit", "7", path, NULL };
	char *json[] = { "report", "--json", "--sort", "total", "--no-idle", path, NULL };
	optind = 0;
	if (which == 1)
		cmd_report(4, text);
	else if (which == 2)
		cmd_report(6, json);
	return 0;
}
