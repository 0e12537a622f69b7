/*
 * fuzz_reader.c — libFuzzer target for everything that reads a .strata
 * file: the reader, profile ingestion (whole and incremental), aggregation
 * with filters, the JSON writer, `strata report` itself (text and --json)
 * and `strata dump` (every record decoded and printed), all on arbitrary
 * bytes. It links the whole CLI but main.c
 * (tests/fuzz/fuzz.mk), as every target does.
 *
 * Inputs: a .strata file, or pieces sealed into one (pieces.h).
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "pieces.h"
#include "cli/builtin.h"
#include "common/format.h"
#include "lib/json.h"
#include "lib/profile.h"
#include "lib/reader.h"

static int memfd = -1;
static FILE *sink;
static struct wbuf file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = fuzz_memfd();
	sink = fopen("/dev/null", "w");
	/* The report prints to stdout, its messages to stderr. */
	fuzz_setup();
	wbuf_init(&file);
	return 0;
}

static void set_file(const uint8_t *d, size_t n)
{
	fuzz_memfd_set(memfd, d, n);
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
	pieces_file(&file, data, size);
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

	/* Each input also takes one of four other paths (chosen by its
	 * length, so a mutation that changes it explores another): every path
	 * re-parses the file, and doing all four per input would multiply the
	 * time per execution for little new coverage. */
	int which = (int)(size % 4);

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
	char *dump[] = { "dump", "--samples", path, NULL };
	optind = 0;
	if (which == 1)
		cmd_report(4, text);
	else if (which == 2)
		cmd_report(6, json);
	else if (which == 3)
		cmd_dump(3, dump);
	return 0;
}
