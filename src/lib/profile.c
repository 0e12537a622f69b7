/*
 * profile.c — building the profile model from records; see profile.h.
 *
 * Records arrive in file order from the reader, chunk by chunk, with the
 * chunks of different processes interleaved. Code and stack indices are
 * per stream, so each stream keeps its own index → code / node maps; a
 * stack is converted to a call-tree node once, when its REC_STACK arrives
 * (stacks.c), so a sample costs a few hash lookups and no allocation
 * beyond amortised array growth.
 *
 * The file may be damaged: a record whose body does not decode is counted
 * and skipped, a sample whose stack record was lost gets a marker frame,
 * and every such problem becomes one line in p->warnings.
 *
 * Here every record is dispatched, functions, frames and nodes are
 * interned and samples stored; the records that say what ran (the
 * session, its events, processes and threads) are read in profile-procs.c.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profile-internal.h"

const char *pkind_name(int kind)
{
	switch (kind) {
	case PK_PYTHON: return "python";
	case PK_NATIVE: return "native";
	case PK_JIT: return "jit";
	default: return "other";
	}
}

/* Grows *arr (elements of `size` bytes) to hold at least n; doubling. */
int grow(void *arr, uint32_t *cap, uint64_t n, size_t size)
{
	if (n <= *cap)
		return 0;
	uint64_t c = *cap ? *cap : 64;
	while (c < n)
		c *= 2;
	if (c > UINT32_MAX - 1)
		c = UINT32_MAX - 1;
	if (c < n)
		return -1;
	void *p = realloc(*(void **)arr, (size_t)c * size);
	if (!p)
		return -1;
	*(void **)arr = p;
	*cap = (uint32_t)c;
	return 0;
}

/* ---- interning ------------------------------------------------------- */

struct func_key {
	const struct profile *p;
	struct pfunc f;
};

static int func_eq(const void *ctx, uint32_t id)
{
	const struct func_key *k = ctx;
	const struct pfunc *f = &k->p->funcs[id];
	/* Strings are interned: equal strings are the same pointer. */
	return f->kind == k->f.kind && f->name == k->f.name && f->file == k->f.file && f->line == k->f.line &&
	       f->module == k->f.module;
}

uint32_t profile_intern_func(struct profile *p, int kind, const char *name, const char *file, uint32_t line,
			     const char *module)
{
	struct profile_internal *in = p->in;
	struct func_key k = { p, { .kind = (uint8_t)kind, .line = line } };
	k.f.name = strpool_str(&in->strs, name);
	k.f.file = strpool_str(&in->strs, file);
	k.f.module = module ? strpool_str(&in->strs, module) : NULL;
	if (!k.f.name || !k.f.file || (module && !k.f.module))
		goto oom;
	uint64_t h = hash_u64((uintptr_t)k.f.name ^ hash_u64((uintptr_t)k.f.file) ^
			      hash_u64((uint64_t)line << 8 | (uint64_t)kind) ^ hash_u64((uintptr_t)k.f.module + 1));
	uint32_t id = idmap_find(&in->func_map, h, func_eq, &k);
	if (id != MAP_NONE)
		return id;
	if (grow(&p->funcs, &in->cap_funcs, (uint64_t)p->nfuncs + 1, sizeof(*p->funcs)))
		goto oom;
	id = p->nfuncs;
	if (idmap_add(&in->func_map, h, id))
		goto oom;
	p->funcs[p->nfuncs++] = k.f;
	return id;
oom:
	in->oom = 1;
	return PNONE;
}

struct frame_key {
	const struct profile *p;
	struct pframe f;
};

static int frame_eq(const void *ctx, uint32_t id)
{
	const struct frame_key *k = ctx;
	const struct pframe *f = &k->p->frames[id];
	return f->func == k->f.func && f->line == k->f.line && f->addr == k->f.addr &&
	       f->inlined_into == k->f.inlined_into;
}

/* The line-row key of (func, line): line rows aggregate frames that differ
 * only in address. */
static uint32_t fl_key(struct profile *p, uint32_t func, uint32_t line)
{
	struct profile_internal *in = p->in;
	uint64_t key = (uint64_t)func << 32 | line;
	uint32_t id = u64map_get(&in->fl_map, key);
	if (id != MAP_NONE)
		return id;
	if (grow(&in->fl_func, &in->cap_fl_func, (uint64_t)in->nfl + 1, sizeof(uint32_t)) ||
	    grow(&in->fl_line, &in->cap_fl_line, (uint64_t)in->nfl + 1, sizeof(uint32_t)))
		return PNONE;
	id = in->nfl;
	if (u64map_put(&in->fl_map, key, id))
		return PNONE;
	in->fl_func[id] = func;
	in->fl_line[id] = line;
	in->nfl++;
	return id;
}

uint32_t profile_intern_frame(struct profile *p, uint32_t func, uint32_t line, uint64_t addr)
{
	return profile_intern_inlined_frame(p, func, line, addr, PNONE);
}

uint32_t profile_intern_inlined_frame(struct profile *p, uint32_t func, uint32_t line, uint64_t addr, uint32_t into)
{
	struct profile_internal *in = p->in;
	if (func == PNONE)
		return PNONE;
	struct frame_key k = { p, { .func = func, .line = line, .addr = addr, .inlined_into = into } };
	uint64_t h = hash_u64((uint64_t)func << 32 | line) ^ hash_u64(addr + 0x9e3779b97f4a7c15ull) ^
		     hash_u64((uint64_t)into << 1 | 1);
	uint32_t id = idmap_find(&in->frame_map, h, frame_eq, &k);
	if (id != MAP_NONE)
		return id;
	if (grow(&in->frame_fl, &in->cap_frame_fl, (uint64_t)p->nframes + 1, sizeof(uint32_t)) ||
	    grow(&p->frames, &in->cap_frames, (uint64_t)p->nframes + 1, sizeof(*p->frames)))
		goto oom;
	uint32_t fl = fl_key(p, func, line);
	if (fl == PNONE)
		goto oom;
	id = p->nframes;
	if (idmap_add(&in->frame_map, h, id))
		goto oom;
	p->frames[id] = k.f;
	in->frame_fl[id] = fl;
	p->nframes++;
	return id;
oom:
	in->oom = 1;
	return PNONE;
}

uint32_t profile_intern_node(struct profile *p, uint32_t parent, uint32_t frame, uint8_t first)
{
	struct profile_internal *in = p->in;
	uint64_t key = (uint64_t)parent << 32 | frame;
	uint32_t id = u64map_get(&in->node_map, key);
	if (id != MAP_NONE)
		return id;
	uint64_t n = (uint64_t)p->nnodes + 1;
	if (grow(&p->nodes, &in->cap_nodes, n, sizeof(*p->nodes)) ||
	    grow(&in->node_func, &in->cap_node_func, n, sizeof(uint32_t)) ||
	    grow(&in->node_fl, &in->cap_node_fl, n, sizeof(uint32_t)) ||
	    grow(&in->node_first, &in->cap_node_first, n, 1))
		goto oom;
	id = p->nnodes;
	if (u64map_put(&in->node_map, key, id))
		goto oom;
	p->nodes[id] = (struct pnode){ .parent = parent, .frame = frame, .depth = p->nodes[parent].depth + 1 };
	in->node_func[id] = p->frames[frame].func;
	in->node_fl[id] = in->frame_fl[frame];
	in->node_first[id] = first;
	p->nnodes++;
	return id;
oom:
	in->oom = 1;
	return PNONE;
}

uint32_t profile_marker_frame(struct profile *p, const char *name)
{
	return profile_intern_frame(p, profile_intern_func(p, PK_OTHER, name, "", 0, NULL), 0, 0);
}

/* ---- streams --------------------------------------------------------- */

static uint32_t stream_slot(struct profile *p, uint64_t id)
{
	struct profile_internal *in = p->in;
	if (in->nstreams && in->last_stream_id == id)
		return in->last_stream;
	uint32_t s = u64map_get(&in->stream_map, id);
	if (s == MAP_NONE) {
		if (grow(&in->streams, &in->cap_streams, (uint64_t)in->nstreams + 1, sizeof(*in->streams)))
			goto oom;
		s = in->nstreams;
		if (u64map_put(&in->stream_map, id, s))
			goto oom;
		in->streams[s] = (struct pstream){ .id = id, .proc = PNONE };
		in->nstreams++;
	}
	in->last_stream_id = id;
	in->last_stream = s;
	return s;
oom:
	in->oom = 1;
	return PNONE;
}

/* ---- records ---------------------------------------------------------- */

static void on_code(struct profile *p, uint32_t st, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	struct rec_code r;
	if (rec_get_code(body, &r)) {
		in->bad_bodies++;
		return;
	}
	const char *name = r.qualname && *r.qualname ? r.qualname : r.name;
	uint32_t func = profile_intern_func(p, PK_PYTHON, name, r.filename, r.firstlineno, NULL);
	if (func == PNONE ||
	    grow(&in->codes, &in->cap_codes, (uint64_t)in->ncodes + 1, sizeof(*in->codes))) {
		in->oom = 1;
		rec_free_code(&r);
		return;
	}
	struct pcode *pc = &in->codes[in->ncodes];
	pc->func = func;
	if (linetable_decode(&pc->lt, (int)r.linetable_fmt, r.linetable, r.linetable_len, r.firstlineno) ||
	    u64map_put(&in->code_map, (uint64_t)st << 32 | r.index, in->ncodes)) {
		linetable_free(&pc->lt);
		in->oom = 1;
		rec_free_code(&r);
		return;
	}
	in->ncodes++;
	rec_free_code(&r);
}

static void on_stack(struct profile *p, uint32_t st, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	struct rec_stack r;
	if (rec_get_stack(body, &r)) {
		in->bad_bodies++;
		return;
	}
	uint32_t node = stack_to_node(p, st, &r);
	if (node != PNONE && u64map_put(&in->stack_map, (uint64_t)st << 32 | r.index, node))
		in->oom = 1;
	/* A sample's task is its stack's innermost. */
	uint32_t t = r.ntasks ? tasks_lookup(p, st, r.tasks[0].task) : PNONE;
	if (t != PNONE && u64map_put(&in->stack_task, (uint64_t)st << 32 | r.index, t))
		in->oom = 1;
	rec_free_stack(&r);
}

uint64_t profile_append_sample(struct profile *p, uint32_t st, uint32_t pr, uint32_t tid, uint32_t stack,
			       uint64_t time, uint32_t flags)
{
	struct profile_internal *in = p->in;
	uint32_t node = u64map_get(&in->stack_map, (uint64_t)st << 32 | stack);
	if (node == MAP_NONE) {
		in->unknown_stacks++;
		uint32_t f = profile_marker_frame(p, "[unknown stack]");
		node = f == PNONE ? PNONE : profile_intern_node(p, 0, f, NODE_FIRST_FUNC | NODE_FIRST_LINE);
		if (node == PNONE)
			return UINT64_MAX;
	}
	uint32_t t = thread_get(p, pr, tid);
	if (t == PNONE)
		return UINT64_MAX;
	/* Amortised growth; more than 4G samples is not a file this reader
	 * can hold (grow() fails). */
	if (grow(&p->samples, &in->cap_samples, p->nsamples + 1, sizeof(*p->samples)) ||
	    grow(&p->values, &in->cap_values, p->nsamples + 1, sizeof(uint64_t) * p->nevents)) {
		in->oom = 1;
		return UINT64_MAX;
	}
	in->events_fixed = 1;
	p->samples[p->nsamples] = (struct psample){
		.node = node,
		.thread = t,
		.time_ns = time,
		.flags = flags,
		.type = PNONE,
		.task = PNONE,
	};
	uint32_t task = in->stack_task.count ? u64map_get(&in->stack_task, (uint64_t)st << 32 | stack) : MAP_NONE;
	if (task != MAP_NONE)
		p->samples[p->nsamples].task = task;
	memset(p->values + p->nsamples * p->nevents, 0, sizeof(uint64_t) * p->nevents);
	if (!in->have_time || time < in->first_time)
		in->first_time = time;
	if (!in->have_time || time > in->last_time)
		in->last_time = time;
	in->have_time = 1;
	return p->nsamples++;
}

static void on_sample(struct profile *p, uint32_t st, const struct reader_stream *rs, struct rbuf *body)
{
	struct profile_internal *in = p->in;
	struct rec_sample r;
	if (rec_get_sample(body, &r)) {
		in->bad_bodies++;
		return;
	}
	uint32_t pr = stream_proc(p, st, rs);
	if (pr == PNONE)
		return;
	struct pstream *s = &in->streams[st];
	s->clock += (uint64_t)r.dt_ns;
	if (p->procs[pr].flags & PROC_UNSUPPORTED)
		return; /* not profiled: nothing it says can be trusted */
	uint64_t i = profile_append_sample(p, st, pr, r.tid, r.stack, s->clock,
					   ((r.flags & SAMPLE_IDLE) ? PS_IDLE : 0) |
						   ((r.flags & SAMPLE_TASK_WAITING) ? PS_WAITING : 0));
	if (i == UINT64_MAX)
		return;
	uint64_t w = r.weight;
	uint64_t *v = p->values + i * p->nevents;
	v[0] = w;
	p->totals[0] += w;
	/* Counters fill the -e events, which come first after "samples";
	 * object events (objects.c) are never counters. */
	uint32_t ncount = p->obj_event ? p->obj_event - 1 : p->nevents - 1;
	for (uint32_t e = 1; e <= ncount; e++) {
		v[e] = e - 1 < r.ncounters ? r.counters[e - 1] : 0;
		p->totals[e] += v[e];
	}
	uint32_t t = p->samples[i].thread;
	p->threads[t].samples += w;
	p->procs[pr].samples += w;
	if (in->native_stacks.count) {
		uint32_t nf = u64map_get(&in->native_stacks, (uint64_t)st << 32 | r.stack);
		if (nf != MAP_NONE) {
			p->native.samples += w;
			p->native.failed += nf & NSTACK_FAILED ? w : 0;
			p->native.truncated += nf & NSTACK_TRUNCATED ? w : 0;
			p->native.mismatch += nf & NSTACK_MISMATCH ? w : 0;
		}
	}
}

static int on_record(void *ctx, struct reader_stream *rs, uint64_t type, struct rbuf *body)
{
	struct profile *p = ctx;
	struct profile_internal *in = p->in;
	uint32_t st = stream_slot(p, rs->id);
	if (st == PNONE)
		return 1;
	switch (type) {
	case REC_SESSION: on_session(p, body); break;
	case REC_SESSION_END: on_session_end(p, body); break;
	case REC_PROCESS: on_process(p, st, body); break;
	case REC_PROCESS_END: on_process_end(p, st, rs, body); break;
	case REC_THREAD:
	case REC_THREAD_NAME:
	case REC_THREAD_END: on_thread(p, st, rs, type, body); break;
	case REC_CODE: on_code(p, st, body); break;
	case REC_STACK: on_stack(p, st, body); break;
	case REC_SAMPLE: on_sample(p, st, rs, body); break;
	case REC_DROPPED: on_dropped(p, st, rs, body); break;
	case REC_MODULE: native_on_module(p, st, body); break;
	case REC_PERFMAP: native_on_perfmap(p, st, body); break;
	case REC_JIT_IMAGE:
	case REC_JIT_UNLOAD: native_on_jit(p, st, type, body); break;
	case REC_EVENT_DESC: on_event_desc(p, body); break;
	case REC_TASK: tasks_on_record(p, st, body); break;
	case REC_OBJ_TYPE:
	case REC_ALLOC:
	case REC_ALLOC_TYPE:
	case REC_FREE: objects_on_record(p, st, stream_proc(p, st, rs), type, body); break;
	default: break; /* known to the reader but not used by the model yet */
	}
	return in->oom ? 1 : 0;
}

/* ---- warnings ------------------------------------------------------------ */

static void clear_warnings(struct profile *p)
{
	for (uint32_t i = 0; i < p->nwarnings; i++)
		free(p->warnings[i]);
	free(p->warnings);
	p->warnings = NULL;
	p->nwarnings = 0;
}

static void add_warning(struct profile *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_warning(struct profile *p, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	char **w = n < 0 ? NULL : realloc(p->warnings, (p->nwarnings + 1) * sizeof(*w));
	if (!w) {
		if (n >= 0)
			free(s);
		return;
	}
	p->warnings = w;
	p->warnings[p->nwarnings++] = s;
}

/* Rebuilt after every ingest, so the live view always shows the current
 * state rather than an accumulating history. */
static void build_warnings(struct profile *p, struct reader *r)
{
	struct profile_internal *in = p->in;
	clear_warnings(p);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f) {
		reader_report_diag(r, f, "");
		fclose(f);
		for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
			nl = strchr(line, '\n');
			if (nl)
				*nl = 0;
			if (*line)
				add_warning(p, "%s", line);
		}
		free(buf);
	}
	for (uint32_t i = 0; i < p->nprocs; i++)
		if (p->procs[i].flags & PROC_UNSUPPORTED)
			add_warning(p, (p->procs[i].flags & PROC_REFUSED) ?
				    "process %u (%s) runs Python %s, which its agent module cannot read (a layout or "
				    "build that differs; the agent said which when it started): it was not profiled" :
				    "process %u (%s) runs Python %s, which has no agent build: it was not profiled",
				    p->procs[i].pid, p->procs[i].command ? p->procs[i].command : "?",
				    p->procs[i].python_version ? p->procs[i].python_version : "?");
	if (in->bad_bodies)
		add_warning(p, "%" PRIu64 " malformed record(s) were skipped", in->bad_bodies);
	if (in->orphan_records)
		add_warning(p, "%" PRIu64 " process stream(s) lost their first chunk: shown without a command line",
			    in->orphan_records);
	if (in->unknown_stacks)
		add_warning(p, "%" PRIu64 " sample(s) name a stack whose record was lost: shown as [unknown stack]",
			    in->unknown_stacks);
	if (in->unknown_codes)
		add_warning(p, "%" PRIu64 " frame(s) name a code object whose record was lost: shown as [unknown code]",
			    in->unknown_codes);
}

/* ---- public ------------------------------------------------------------- */

struct profile *profile_new(const struct load_opts *o)
{
	struct profile *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->in = calloc(1, sizeof(*p->in));
	if (!p->in) {
		free(p);
		return NULL;
	}
	if (o)
		p->in->opts = *o;
	/* Node 0 is the root. */
	struct profile_internal *in = p->in;
	if (set_events(p, 0, NULL) || grow(&p->nodes, &in->cap_nodes, 1, sizeof(*p->nodes)) ||
	    grow(&in->node_func, &in->cap_node_func, 1, sizeof(uint32_t)) ||
	    grow(&in->node_fl, &in->cap_node_fl, 1, sizeof(uint32_t)) ||
	    grow(&in->node_first, &in->cap_node_first, 1, 1)) {
		profile_free(p);
		return NULL;
	}
	p->nodes[0] = (struct pnode){ .parent = PNONE, .frame = PNONE, .depth = 0 };
	in->node_func[0] = in->node_fl[0] = PNONE;
	in->node_first[0] = 0;
	p->nnodes = 1;
	return p;
}

int profile_ingest(struct profile *p, struct reader *r, int final, char *err, size_t errlen)
{
	struct profile_internal *in = p->in;
	int rc = reader_poll(r, final, on_record, p, err, errlen);
	if (rc < 0)
		return -1;
	if (in->oom) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	/* Session times: the CLI's start and end records; without them
	 * (a killed `strata record`, a lost chunk) the sample times. */
	if (!in->have_session)
		p->start_ns = in->have_time ? in->first_time : p->nprocs ? p->procs[0].start_ns : 0;
	if (!in->have_session_end)
		p->end_ns = in->have_time && in->last_time > p->start_ns ? in->last_time : p->start_ns;
	uint64_t dropped = 0;
	for (uint32_t i = 0; i < p->nprocs; i++)
		dropped += p->procs[i].dropped;
	p->dropped = dropped;
	const struct reader_diag *d = reader_diag(r);
	size_t ns;
	const struct reader_stream *streams = reader_streams(r, &ns);
	int unfinished = 0;
	for (size_t i = 0; i < ns; i++)
		if (streams[i].pid && !streams[i].ended)
			unfinished = 1;
	p->truncated = d->truncated || unfinished || (final && d->corrupt_chunks);
	build_warnings(p, r);
	return 0;
}

struct profile *profile_load(const char *path, const struct load_opts *o, char *err, size_t errlen)
{
	struct reader *r = reader_open(path, err, errlen);
	if (!r)
		return NULL;
	struct profile *p = profile_new(o);
	if (!p) {
		snprintf(err, errlen, "out of memory");
		reader_close(r);
		return NULL;
	}
	if (profile_ingest(p, r, 1, err, errlen)) {
		profile_free(p);
		reader_close(r);
		return NULL;
	}
	/* A header and nothing readable after it is not a profile. */
	const struct reader_diag *d = reader_diag(r);
	if (d->chunks == 0) {
		if (d->corrupt_chunks)
			snprintf(err, errlen, "damaged: no chunk of the file passes its checksum");
		else if (d->truncated)
			snprintf(err, errlen, "file is cut short before its first complete chunk: no profile data");
		else
			snprintf(err, errlen, "file holds no profile data (only a header)");
		profile_free(p);
		reader_close(r);
		return NULL;
	}
	reader_close(r);
	return p;
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	struct profile_internal *in = p->in;
	free(p->command);
	free(p->strata_version);
	free(p->hostname);
	free(p->python_version);
	for (uint32_t i = 0; i < p->nevents; i++)
		free(p->event_names[i]);
	free(p->event_names);
	free(p->totals);
	free(p->event_info);
	free(p->funcs);
	free(p->frames);
	free(p->nodes);
	free(p->samples);
	free(p->values);
	for (uint32_t i = 0; i < p->nthreads; i++)
		free(p->threads[i].name);
	free(p->threads);
	for (uint32_t i = 0; i < p->nprocs; i++) {
		free(p->procs[i].command);
		free(p->procs[i].executable);
		free(p->procs[i].python_version);
	}
	free(p->procs);
	for (uint32_t i = 0; i < p->nmodules; i++) {
		free(p->modules[i].path);
		free(p->modules[i].build_id);
	}
	free(p->modules);
	clear_warnings(p);
	if (in) {
		native_free(p);
		strpool_free(&in->strs);
		idmap_free(&in->func_map);
		idmap_free(&in->frame_map);
		u64map_free(&in->node_map);
		u64map_free(&in->fl_map);
		u64map_free(&in->stream_map);
		u64map_free(&in->code_map);
		u64map_free(&in->stack_map);
		u64map_free(&in->thread_map);
		u64map_free(&in->pyframe_map);
		free(in->node_func);
		free(in->node_fl);
		free(in->node_first);
		free(in->func_stamp);
		free(in->fl_stamp);
		for (uint32_t i = 0; i < in->ncodes; i++)
			linetable_free(&in->codes[i].lt);
		free(in->codes);
		free(in->streams);
		free(in->frame_fl);
		free(in->fl_func);
		free(in->fl_line);
		free(in->scratch);
		free(in->merge_scratch);
		objects_free(p);
		tasks_free(p);
		free(in);
	}
	free(p);
}

uint32_t profile_stack(const struct profile *p, uint32_t node, uint32_t *frames, uint32_t max)
{
	if (node >= p->nnodes)
		return 0;
	uint32_t depth = p->nodes[node].depth;
	for (uint32_t n = node, i = depth; n != 0 && n != PNONE && i > 0; n = p->nodes[n].parent) {
		i--;
		if (i < max)
			frames[i] = p->nodes[n].frame;
	}
	return depth;
}
