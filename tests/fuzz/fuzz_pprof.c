/*
 * fuzz_pprof.c — libFuzzer target for the exporters on whatever model a
 * .strata file can give: every format writes the model of a hostile file
 * without crashing, and `-f pprof` round-trips: its gzip stream inflates
 * and its profile.proto decodes (a small protobuf reader here) to a
 * profile that keeps pprof's rules, which pprof.c says hold by
 * construction: string 0 is "", every string index in the table, ids
 * non-zero and unique, every location, function and mapping a sample or
 * line names exists, and every sample has one value per sample type.
 *
 * `-f otlp`'s output must at least parse as protobuf (wire_ok).
 *
 * Input: a .strata file or pieces (pieces.h), loaded as `strata convert`
 * loads it. pprof runs on every input; one other exporter, chosen by the
 * input's length, on each.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "pieces.h"
#include "export/export.h"
#include "lib/profile.h"
#include "lib/reader.h"

static int memfd = -1;
static struct wbuf file;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	memfd = fuzz_memfd();
	wbuf_init(&file);
	return 0;
}

/* ---- a protobuf reader: just what profile.proto needs ---------------------- */

struct pbr {
	const uint8_t *p, *end;
};

static uint64_t pbr_varint(struct pbr *r)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		FUZZ_CHECK(r->p < r->end);
		uint8_t b = *r->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	FUZZ_CHECK(!"varint longer than 10 bytes");
	return 0;
}

/* The next field: its number, and its value (varint) or bytes (length
 * delimited). pprof.c writes no other wire types. */
static int pbr_field(struct pbr *r, uint32_t *field, uint64_t *v, struct pbr *sub)
{
	if (r->p == r->end)
		return 0;
	uint64_t key = pbr_varint(r);
	*field = (uint32_t)(key >> 3);
	FUZZ_CHECK(*field != 0);
	if ((key & 7) == 0) {
		*v = pbr_varint(r);
	} else {
		FUZZ_CHECK((key & 7) == 2);
		uint64_t n = pbr_varint(r);
		FUZZ_CHECK(n <= (uint64_t)(r->end - r->p));
		sub->p = r->p;
		sub->end = r->p + n;
		r->p += n;
	}
	return 1;
}

/* ---- the profile, as read back ---------------------------------------------- */

#define MAXN 4096

struct ids {
	uint64_t id[MAXN];
	uint32_t n;
};

struct pp {
	uint32_t nstrings;
	int first_empty;
	uint32_t nsample_types;
	struct ids mappings, locations, functions;
	/* references, checked once every table is read (they may come first) */
	struct ids ref_locations, ref_functions, ref_mappings;
	uint64_t max_str;
};

static void add_id(struct ids *s, uint64_t id)
{
	FUZZ_CHECK(id != 0);
	if (s->n < MAXN)
		s->id[s->n++] = id;
}

static void add_ref(struct ids *s, uint64_t id)
{
	if (s->n < MAXN)
		s->id[s->n++] = id;
}

static int has(const struct ids *s, uint64_t id)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->id[i] == id)
			return 1;
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;
	return *x < *y ? -1 : *x > *y;
}

static void unique(struct ids *s)
{
	qsort(s->id, s->n, sizeof(s->id[0]), u64_cmp);
	for (uint32_t i = 1; i < s->n; i++)
		FUZZ_CHECK(s->id[i - 1] != s->id[i]);
}

static void str_ref(struct pp *pp, uint64_t idx)
{
	if (idx > pp->max_str)
		pp->max_str = idx;
}

static uint32_t count_packed(struct pbr *r, struct pp *pp, struct ids *refs)
{
	uint32_t n = 0;
	while (r->p < r->end) {
		uint64_t v = pbr_varint(r);
		if (refs)
			add_ref(refs, v);
		n++;
	}
	(void)pp;
	return n;
}

static void decode(const uint8_t *d, size_t n)
{
	static struct pp pp;
	memset(&pp, 0, sizeof(pp));
	struct pbr top = { d, d + n }, m, s;
	uint32_t f, g;
	uint64_t v;
	while (pbr_field(&top, &f, &v, &m)) {
		switch (f) {
		case 1:  /* sample_type */
		case 11: /* period_type */
			if (f == 1)
				pp.nsample_types++;
			while (pbr_field(&m, &g, &v, &s))
				str_ref(&pp, v);
			break;
		case 2: { /* sample */
			uint32_t nvalues = 0;
			while (pbr_field(&m, &g, &v, &s)) {
				if (g == 1)
					count_packed(&s, &pp, &pp.ref_locations);
				else if (g == 2)
					nvalues += count_packed(&s, &pp, NULL);
				else if (g == 3) { /* label: key, str, num */
					struct pbr l;
					uint64_t lv;
					uint32_t h;
					while (pbr_field(&s, &h, &lv, &l))
						if (h == 1 || h == 2)
							str_ref(&pp, lv);
				}
			}
			FUZZ_CHECK(nvalues == pp.nsample_types);
			break;
		}
		case 3: /* mapping */
			while (pbr_field(&m, &g, &v, &s)) {
				if (g == 1)
					add_id(&pp.mappings, v);
				else if (g == 5 || g == 6)
					str_ref(&pp, v);
			}
			break;
		case 4: /* location */
			while (pbr_field(&m, &g, &v, &s)) {
				if (g == 1) {
					add_id(&pp.locations, v);
				} else if (g == 2) {
					add_ref(&pp.ref_mappings, v);
				} else if (g == 4) { /* line: function_id, line */
					struct pbr l;
					uint64_t lv;
					uint32_t h;
					while (pbr_field(&s, &h, &lv, &l))
						if (h == 1)
							add_ref(&pp.ref_functions, lv);
				}
			}
			break;
		case 5: /* function */
			while (pbr_field(&m, &g, &v, &s)) {
				if (g == 1)
					add_id(&pp.functions, v);
				else if (g >= 2 && g <= 4)
					str_ref(&pp, v);
			}
			break;
		case 6: /* string_table */
			if (pp.nstrings++ == 0)
				pp.first_empty = m.p == m.end;
			break;
		case 13: /* comment */
		case 14: /* default_sample_type */
			str_ref(&pp, v);
			break;
		}
	}
	FUZZ_CHECK(pp.nstrings >= 1 && pp.first_empty);
	FUZZ_CHECK(pp.max_str < pp.nstrings);
	FUZZ_CHECK(pp.nsample_types >= 1);
	unique(&pp.mappings);
	unique(&pp.locations);
	unique(&pp.functions);
	for (uint32_t i = 0; i < pp.ref_locations.n; i++)
		FUZZ_CHECK(pp.locations.n == MAXN || has(&pp.locations, pp.ref_locations.id[i]));
	for (uint32_t i = 0; i < pp.ref_functions.n; i++)
		FUZZ_CHECK(pp.functions.n == MAXN || has(&pp.functions, pp.ref_functions.id[i]));
	for (uint32_t i = 0; i < pp.ref_mappings.n; i++)
		FUZZ_CHECK(pp.mappings.n == MAXN || has(&pp.mappings, pp.ref_mappings.id[i]));
}

/* The gzip member pprof.c wrote, inflated. */
static void round_trip(const uint8_t *gz, size_t n)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	FUZZ_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK);
	size_t cap = 1 << 16, len = 0;
	uint8_t *out = malloc(cap);
	FUZZ_CHECK(out);
	z.next_in = (uint8_t *)gz;
	z.avail_in = (uInt)n;
	int r;
	do {
		if (len == cap) {
			cap *= 2;
			out = realloc(out, cap);
			FUZZ_CHECK(out);
		}
		z.next_out = out + len;
		z.avail_out = (uInt)(cap - len);
		r = inflate(&z, Z_NO_FLUSH);
		len = cap - z.avail_out;
		FUZZ_CHECK(r == Z_OK || r == Z_STREAM_END);
	} while (r != Z_STREAM_END);
	FUZZ_CHECK(z.avail_in == 0);
	inflateEnd(&z);
	decode(out, len);
	free(out);
}

/* -f otlp (src/export/otlp.c, what the sender posts): protobuf that parses
 * as such, the request and each message in it (resource_profiles = 1,
 * dictionary = 2). The schema itself is not checked here: no decoder of
 * OTLP profiles is at hand (docs/fuzzing.md). */
static int wire_ok(const uint8_t *d, size_t n, int top)
{
	const uint8_t *p = d, *end = d + n;
	while (p < end) {
		uint64_t key = 0;
		int shift = 0;
		do {
			if (p == end || shift > 63)
				return 0;
			key |= (uint64_t)(*p & 0x7f) << shift;
			shift += 7;
		} while (*p++ & 0x80);
		uint64_t v = 0;
		switch (key & 7) {
		case 0:
			for (shift = 0;; shift += 7) {
				if (p == end || shift > 63)
					return 0;
				if (!(*p++ & 0x80))
					break;
			}
			break;
		case 1:
		case 5: {
			size_t w = (key & 7) == 1 ? 8 : 4;
			if ((size_t)(end - p) < w)
				return 0;
			p += w;
			break;
		}
		case 2:
			for (shift = 0;; shift += 7) {
				if (p == end || shift > 63)
					return 0;
				v |= (uint64_t)(*p & 0x7f) << shift;
				if (!(*p++ & 0x80))
					break;
			}
			if (v > (uint64_t)(end - p))
				return 0;
			if (top && ((key >> 3) == 1 || (key >> 3) == 2) && !wire_ok(p, (size_t)v, 0))
				return 0;
			p += v;
			break;
		default:
			return 0;
		}
		if (!(key >> 3))
			return 0;
	}
	return 1;
}

static int export_to_memory(const struct exporter *ex, const struct profile *p, uint8_t **out, size_t *n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		abort();
	struct export_opts o = { .title = "fuzz", .source = "fuzz.strata", .event = 0, .exclude_idle = 0 };
	char err[256];
	int rc = ex->fn(p, f, &o, err, sizeof(err));
	fclose(f);
	*out = (uint8_t *)buf;
	*n = len;
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	pieces_file(&file, data, size);
	if (file.oom)
		return 0;
	fuzz_memfd_set(memfd, file.data, file.len);
	char err[512];
	struct reader *r = reader_open_fd(memfd, err, sizeof(err));
	if (!r)
		return 0;
	struct profile *p = profile_new(NULL);
	if (p && profile_ingest(p, r, 1, err, sizeof(err)) == 0) {
		uint8_t *out;
		size_t n;
		if (export_to_memory(exporter_find("pprof"), p, &out, &n) == 0)
			round_trip(out, n);
		free(out);
		size_t nex = 0;
		while (exporters[nex])
			nex++;
		const struct exporter *ex = exporters[size % nex];
		if (strcmp(ex->name, "pprof")) {
			int rc = export_to_memory(ex, p, &out, &n);
			if (rc == 0 && !strcmp(ex->name, "otlp"))
				FUZZ_CHECK(wire_ok(out, n, 1));
			free(out);
		}
	}
	profile_free(p);
	reader_close(r);
	return 0;
}
