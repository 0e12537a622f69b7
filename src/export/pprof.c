/*
 * pprof.c — `-f pprof`: a gzip-compressed profile.proto, the format of
 * Google's pprof (`go tool pprof`, `pprof -http`) and of continuous
 * profiling servers (Grafana Pyroscope, Parca, Polar Signals, Datadog).
 *
 * The protobuf wire encoding is written by hand (pb.c: varints,
 * length-delimited fields; it is small), through zlib's gzip stream. What goes in:
 *
 *   sample_type    one per recorded event, in order: ("samples", "count"),
 *                  then each -e event as (name, "count"), and with
 *                  --objects pprof's heap types: alloc_objects (count),
 *                  alloc_space (bytes), inuse_objects, inuse_space
 *   period_type    ("cpu" or "wall", "nanoseconds"), period = one sample
 *   sample         one per distinct (stack, thread[, idle][, type]):
 *                  location ids leaf first, one value per sample type,
 *                  labels thread_name (string), thread_id and pid
 *                  (numbers), process (the command line), in wall mode
 *                  state = idle | running, and for allocations (--objects)
 *                  type = what was allocated ("dict", "[PyMem_Malloc]")
 *   location       one per frame (a function at a line, and for native
 *                  code an address): id = frame index + 1, one line; a
 *                  native frame with functions inlined into it (DWARF) is
 *                  one location whose lines are the inlined functions,
 *                  innermost first, then the function they are inlined
 *                  into (profile.proto's convention), id = the innermost
 *                  frame's index + 1
 *   function       one per function: name, filename, start_line;
 *                  id = function index + 1
 *   mapping        the interpreter (for Python code; first, where pprof
 *                  looks for the main binary), then one per native or JIT
 *                  module, referenced by the locations of their code
 *                  (has_functions set: names are already resolved, pprof
 *                  must not try to symbolize; has_inline_frames where
 *                  lines are known, inlined functions being resolved with
 *                  them); no address ranges, which the model does not keep
 *   string_table   entry 0 is "", every string once
 *
 * pprof's validity rules hold by construction: ids are non-zero and
 * unique, every sample has one value per sample type, every referenced
 * location, function, mapping and string exists. Repeated fields may be
 * interleaved on the wire, so samples are written first and the tables
 * after them, the string table last.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "export.h"
#include "labels.h"
#include "pb.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "dev"
#endif

/* profile.proto field numbers (github.com/google/pprof/proto/profile.proto). */
enum {
	PROFILE_SAMPLE_TYPE = 1, PROFILE_SAMPLE = 2, PROFILE_MAPPING = 3, PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5, PROFILE_STRING_TABLE = 6, PROFILE_TIME_NANOS = 9, PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11, PROFILE_PERIOD = 12, PROFILE_COMMENT = 13, PROFILE_DEFAULT_SAMPLE_TYPE = 14,
	VALUETYPE_TYPE = 1, VALUETYPE_UNIT = 2,
	SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3,
	LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3,
	MAPPING_ID = 1, MAPPING_MEMORY_START = 2, MAPPING_MEMORY_LIMIT = 3, MAPPING_FILE_OFFSET = 4,
	MAPPING_FILENAME = 5, MAPPING_BUILD_ID = 6, MAPPING_HAS_FUNCTIONS = 7, MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9, MAPPING_HAS_INLINE_FRAMES = 10,
	LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4,
	LINE_FUNCTION_ID = 1, LINE_LINE = 2,
	FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4,
	FUNCTION_START_LINE = 5,
};
/* ---- gzip output ------------------------------------------------------------ */

struct gz {
	z_stream z;
	FILE *out;
	uint8_t buf[1 << 16];
	int err;
};

static int gz_write(struct gz *g, const uint8_t *d, size_t n, int finish)
{
	g->z.next_in = (Bytef *)d;
	g->z.avail_in = (uInt)n;
	for (;;) {
		g->z.next_out = g->buf;
		g->z.avail_out = sizeof(g->buf);
		int r = deflate(&g->z, finish ? Z_FINISH : Z_NO_FLUSH);
		if (r == Z_STREAM_ERROR) {
			g->err = 1;
			return -1;
		}
		size_t have = sizeof(g->buf) - g->z.avail_out;
		if (have && fwrite(g->buf, 1, have, g->out) != have) {
			g->err = 1;
			return -1;
		}
		if (finish ? r == Z_STREAM_END : g->z.avail_in == 0)
			return 0;
	}
}

/* Hands the encoded top-level fields to the compressor once there are
 * enough of them. */
static int drain(struct gz *g, struct pb *top, int force)
{
	if (top->len < (1u << 20) && !force)
		return 0;
	int r = gz_write(g, top->d, top->len, 0);
	top->len = 0;
	return r;
}

/* ---- the export ------------------------------------------------------------- */

/* Samples are aggregated per (leaf node, thread, idle, allocated type):
 * a chain per node (a node's samples come from few threads), values in a
 * parallel array. */
struct agg_sample {
	uint32_t node, thread, idle;
	uint32_t type;          /* --objects: index into p->types, or PNONE */
	uint32_t next;          /* next of the same node, or PNONE */
};

static void value_type(struct pb *top, struct pb *sub, uint32_t field, int64_t type, int64_t unit)
{
	pb_uint(sub, VALUETYPE_TYPE, (uint64_t)type);
	pb_uint(sub, VALUETYPE_UNIT, (uint64_t)unit);
	pb_msg(top, field, sub);
}

static void label_str(struct pb *lab, struct pb *sample, int64_t key, int64_t str)
{
	pb_uint(lab, LABEL_KEY, (uint64_t)key);
	pb_uint(lab, LABEL_STR, (uint64_t)str);
	pb_msg(sample, SAMPLE_LABEL, lab);
}

static void label_num(struct pb *lab, struct pb *sample, int64_t key, uint64_t num)
{
	pb_uint(lab, LABEL_KEY, (uint64_t)key);
	/* num 0 would be left out as the default, which reads back as 0. */
	pb_uint(lab, LABEL_NUM, num);
	pb_msg(sample, SAMPLE_LABEL, lab);
}

int export_pprof(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	const uint32_t ne = p->nevents;
	int rc = -1, z_ready = 0;
	struct gz *g = calloc(1, sizeof(*g));
	struct pb top = { 0 }, sub = { 0 }, sub2 = { 0 }, packed = { 0 }, locs = { 0 }, *tlab = NULL;
	struct strtab st = { 0 };
	uint32_t *head = malloc(((size_t)p->nnodes + 1) * sizeof(*head));
	struct agg_sample *as = NULL;
	uint64_t *vals = NULL;
	uint8_t *frame_used = calloc((size_t)p->nframes + 1, 1);
	uint32_t *func_mapping = calloc((size_t)p->nfuncs + 1, sizeof(uint32_t));
	uint8_t *func_used = calloc((size_t)p->nfuncs + 1, 1);
	const char **maps = NULL;
	uint8_t *map_files = NULL;
	uint32_t nmaps = 0;
	uint64_t nas = 0, cap_as = 0;
	if (!g || !frame_used || !func_mapping || !func_used || !head)
		goto oom;
	memset(head, 0xff, ((size_t)p->nnodes + 1) * sizeof(*head));
	g->out = out;
	if (deflateInit2(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		goto oom;
	z_ready = 1;

	/* String 0 must be "". */
	str_id(&st, "");

	/* Aggregate samples. */
	int wall = p->mode == MODE_WALL;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		int idle = (s->flags & PS_IDLE) != 0;
		if (o->exclude_idle && idle)
			continue;
		uint32_t type = (s->flags & PS_ALLOC) && s->type < p->ntypes ? s->type : PNONE;
		uint32_t slot;
		for (slot = head[s->node]; slot != PNONE; slot = as[slot].next)
			if (as[slot].thread == s->thread && as[slot].idle == (uint32_t)(wall && idle) &&
			    as[slot].type == type)
				break;
		if (slot == PNONE) {
			if (nas == cap_as) {
				uint64_t cap = cap_as ? cap_as * 2 : 1024;
				struct agg_sample *na = realloc(as, cap * sizeof(*na));
				uint64_t *nv = na ? realloc(vals, cap * ne * sizeof(*nv)) : NULL;
				if (na)
					as = na;
				if (!na || !nv)
					goto oom;
				vals = nv;
				cap_as = cap;
			}
			if (nas >= PNONE)
				goto oom;
			slot = (uint32_t)nas++;
			as[slot] = (struct agg_sample){ s->node, s->thread, (uint32_t)(wall && idle), type, head[s->node] };
			head[s->node] = slot;
			memset(vals + (size_t)slot * ne, 0, ne * sizeof(*vals));
		}
		uint64_t *v = vals + (size_t)slot * ne;
		const uint64_t *sv = p->values + i * ne;
		for (uint32_t e = 0; e < ne; e++)
			v[e] += sv[e];
	}

	/* Header fields. */
	for (uint32_t e = 0; e < ne; e++) {
		/* --objects: pprof's own names for heap profiles, so that
		 * go tool pprof and Pyroscope know them. */
		static const char *const heap[4][2] = { { "alloc_objects", "count" }, { "alloc_space", "bytes" },
							{ "inuse_objects", "count" }, { "inuse_space", "bytes" } };
		if (p->obj_event && e >= p->obj_event && e < p->obj_event + 4)
			value_type(&top, &sub, PROFILE_SAMPLE_TYPE, str_id(&st, heap[e - p->obj_event][0]),
				   str_id(&st, heap[e - p->obj_event][1]));
		else
			value_type(&top, &sub, PROFILE_SAMPLE_TYPE, str_id(&st, p->event_names[e]), str_id(&st, "count"));
	}
	value_type(&top, &sub, PROFILE_PERIOD_TYPE, str_id(&st, wall ? "wall" : "cpu"), str_id(&st, "nanoseconds"));
	pb_uint(&top, PROFILE_PERIOD, p->period_ns);
	pb_uint(&top, PROFILE_TIME_NANOS, p->start_realtime_ns);
	if (p->end_ns > p->start_ns)
		pb_uint(&top, PROFILE_DURATION_NANOS, p->end_ns - p->start_ns);
	pb_uint(&top, PROFILE_DEFAULT_SAMPLE_TYPE, (uint64_t)str_id(&st, p->event_names[o->event < ne ? o->event : 0]));
	pb_uint(&top, PROFILE_COMMENT, (uint64_t)str_id(&st, "strata " STRATA_VERSION));
	if (p->command && *p->command)
		pb_uint(&top, PROFILE_COMMENT, (uint64_t)str_id(&st, p->command));

	/* Samples: locations leaf first, values, labels. A node's location
	 * list is encoded once for all its samples (one per thread), and a
	 * thread's labels once for all its samples. */
	int64_t k_tname = str_id(&st, "thread_name"), k_tid = str_id(&st, "thread_id"), k_pid = str_id(&st, "pid");
	int64_t k_proc = str_id(&st, "process"), k_state = str_id(&st, "state"), k_type = str_id(&st, "type");
	int64_t s_idle = str_id(&st, "idle"), s_running = str_id(&st, "running");
	tlab = calloc((size_t)p->nthreads + 1, sizeof(*tlab));
	if (!tlab)
		goto oom;
	for (uint32_t i = 0; i < p->nthreads; i++) {
		const struct pthread_info *t = &p->threads[i];
		if (t->name && *t->name)
			label_str(&sub2, &tlab[i], k_tname, str_id(&st, t->name));
		label_num(&sub2, &tlab[i], k_tid, t->tid);
		label_num(&sub2, &tlab[i], k_pid, t->pid);
		if (t->process < p->nprocs && p->procs[t->process].command && *p->procs[t->process].command)
			label_str(&sub2, &tlab[i], k_proc, str_id(&st, p->procs[t->process].command));
		if (tlab[i].oom)
			goto oom;
	}
	for (uint32_t node = 1; node < p->nnodes; node++) {
		if (head[node] == PNONE)
			continue;
		for (uint32_t n = node; n != 0 && n != PNONE; n = p->nodes[n].parent) {
			uint32_t f = p->nodes[n].frame;
			frame_used[f] = 1;
			pb_varint(&locs, (uint64_t)f + 1);
			/* The frames it is inlined into are lines of the same
			 * location (they are its parents on every path). */
			for (uint32_t h = f; p->frames[h].inlined_into != PNONE;) {
				uint32_t up = p->nodes[n].parent;
				if (up == 0 || up == PNONE || p->nodes[up].frame != p->frames[h].inlined_into)
					break;
				n = up;
				h = p->nodes[n].frame;
			}
		}
		for (uint32_t i = head[node]; i != PNONE; i = as[i].next) {
			const struct agg_sample *a = &as[i];
			pb_bytes(&sub, SAMPLE_LOCATION_ID, locs.d, locs.len); /* packed */
			const uint64_t *v = vals + (size_t)i * ne;
			for (uint32_t e = 0; e < ne; e++)
				pb_varint(&packed, v[e]);
			/* Packed, zeros included: one value per sample type. */
			pb_msg(&sub, SAMPLE_VALUE, &packed);
			const struct pb *tl = &tlab[a->thread];
			if (!pb_reserve(&sub, tl->len)) {
				memcpy(sub.d + sub.len, tl->d, tl->len);
				sub.len += tl->len;
			}
			if (wall)
				label_str(&sub2, &sub, k_state, a->idle ? s_idle : s_running);
			/* --objects: what was allocated (go tool pprof -tagfocus type=dict). */
			if (a->type != PNONE)
				label_str(&sub2, &sub, k_type, str_id(&st, p->types[a->type]));
			pb_msg(&top, PROFILE_SAMPLE, &sub);
			if (drain(g, &top, 0))
				goto werr;
		}
		locs.len = 0;
		if (top.oom || sub.oom || sub2.oom || packed.oom || locs.oom || st.oom)
			goto oom;
	}

	/* Mappings: the interpreter for Python code (first, as pprof expects
	 * the main binary to be), then one per native or JIT module. */
	for (uint32_t f = 0; f < p->nframes; f++)
		if (frame_used[f])
			for (uint32_t h = f; h != PNONE; h = p->frames[h].inlined_into)
				func_used[p->frames[h].func] = 1;
	for (uint32_t fn = 0; fn < p->nfuncs; fn++) {
		const struct pfunc *pf = &p->funcs[fn];
		const char *obj;
		if (!func_used[fn])
			continue;
		if (pf->kind == PK_PYTHON)
			obj = python_object(p);
		else if ((pf->kind == PK_NATIVE || pf->kind == PK_JIT) && pf->module && *pf->module)
			obj = pf->module;
		else
			continue;
		uint32_t m;
		for (m = 0; m < nmaps && strcmp(maps[m], obj); m++)
			;
		if (m == nmaps) {
			const char **nm = realloc(maps, (nmaps + 1) * sizeof(*nm));
			uint8_t *nf = nm ? realloc(map_files, nmaps + 1) : NULL;
			if (nm)
				maps = nm;
			if (!nm || !nf)
				goto oom;
			map_files = nf;
			maps[nmaps] = obj;
			map_files[nmaps++] = 0;
		}
		if (pf->file && *pf->file)
			map_files[m] = 1;
		func_mapping[fn] = m + 1;
	}
	/* Python code first: swap its mapping into id 1. */
	const char *pyobj = python_object(p);
	for (uint32_t m = 1; m < nmaps; m++)
		if (!strcmp(maps[m], pyobj)) {
			const char *t = maps[0];
			maps[0] = maps[m];
			maps[m] = t;
			uint8_t u = map_files[0];
			map_files[0] = map_files[m];
			map_files[m] = u;
			for (uint32_t fn = 0; fn < p->nfuncs; fn++)
				if (func_mapping[fn] == 1 || func_mapping[fn] == m + 1)
					func_mapping[fn] = func_mapping[fn] == 1 ? m + 1 : 1;
			break;
		}
	for (uint32_t m = 0; m < nmaps; m++) {
		pb_uint(&sub, MAPPING_ID, m + 1);
		pb_uint(&sub, MAPPING_FILENAME, (uint64_t)str_id(&st, maps[m]));
		pb_uint(&sub, MAPPING_HAS_FUNCTIONS, 1);
		pb_uint(&sub, MAPPING_HAS_FILENAMES, map_files[m]);
		pb_uint(&sub, MAPPING_HAS_LINE_NUMBERS, map_files[m]);
		pb_uint(&sub, MAPPING_HAS_INLINE_FRAMES, map_files[m]);
		pb_msg(&top, PROFILE_MAPPING, &sub);
	}

	/* Locations: one per frame used (the innermost of an inlined
	 * chain), a line per function of the chain, innermost first. */
	for (uint32_t f = 0; f < p->nframes; f++) {
		if (!frame_used[f])
			continue;
		const struct pframe *fr = &p->frames[f];
		pb_uint(&sub, LOCATION_ID, (uint64_t)f + 1);
		pb_uint(&sub, LOCATION_MAPPING_ID, func_mapping[fr->func]);
		pb_uint(&sub, LOCATION_ADDRESS, fr->addr);
		for (uint32_t h = f; h != PNONE; h = p->frames[h].inlined_into) {
			pb_uint(&sub2, LINE_FUNCTION_ID, (uint64_t)p->frames[h].func + 1);
			pb_uint(&sub2, LINE_LINE, p->frames[h].line);
			pb_msg(&sub, LOCATION_LINE, &sub2);
		}
		pb_msg(&top, PROFILE_LOCATION, &sub);
		if (drain(g, &top, 0))
			goto werr;
	}

	/* Functions used. */
	for (uint32_t fn = 0; fn < p->nfuncs; fn++) {
		if (!func_used[fn])
			continue;
		const struct pfunc *pf = &p->funcs[fn];
		int64_t name = str_id(&st, pf->name && *pf->name ? pf->name : "???");
		pb_uint(&sub, FUNCTION_ID, (uint64_t)fn + 1);
		pb_uint(&sub, FUNCTION_NAME, (uint64_t)name);
		/* No system_name: we have no mangled names, and pprof rewrites
		 * a name equal to its system_name that looks like C++ (it
		 * would turn "<module>" into ""). */
		pb_uint(&sub, FUNCTION_FILENAME, (uint64_t)str_id(&st, pf->file));
		pb_uint(&sub, FUNCTION_START_LINE, pf->line);
		pb_msg(&top, PROFILE_FUNCTION, &sub);
		if (drain(g, &top, 0))
			goto werr;
	}

	/* The string table, in index order. */
	if (st.oom)
		goto oom;
	for (uint32_t i = 0; i < st.n; i++) {
		pb_bytes(&top, PROFILE_STRING_TABLE, st.s[i], strlen(st.s[i]));
		if (drain(g, &top, 0))
			goto werr;
	}
	if (top.oom || sub.oom || sub2.oom)
		goto oom;
	if (gz_write(g, top.d, top.len, 1))
		goto werr;
	rc = 0;
	goto done;
werr:
	snprintf(err, errlen, "write error");
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
done:
	if (z_ready)
		deflateEnd(&g->z);
	free(g);
	free(top.d);
	free(sub.d);
	free(sub2.d);
	free(packed.d);
	free(locs.d);
	for (uint32_t i = 0; tlab && i < p->nthreads; i++)
		free(tlab[i].d);
	free(tlab);
	idmap_free(&st.map);
	free(st.s);
	free(head);
	free(as);
	free(vals);
	free(frame_used);
	free(func_mapping);
	free(func_used);
	free(maps);
	free(map_files);
	return rc;
}
