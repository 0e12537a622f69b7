/*
 * otlp.c — the OTLP profiles encoder (otlp.h) and `-f otlp`.
 *
 * Written by hand from the signal's .proto (opentelemetry-proto's
 * profiles/v1development as go.opentelemetry.io/proto/slim/otlp/profiles
 * v0.4.1 has it, the version the Collector's core v0.165.0 decodes), with
 * the wire helpers pprof.c uses (pb.c). What goes in:
 *
 *   ResourceProfiles  one per process: its resource attributes are
 *                     service.name, host.name, process.pid,
 *                     process.parent_pid, process.command_line,
 *                     process.executable.path, process.runtime.name
 *                     ("CPython") and .version, telemetry.sdk.name
 *                     ("strata") and .version, then the caller's extras
 *   ScopeProfiles     scope "strata" at this version
 *   Profile           one per recorded event (the signal has one sample
 *                     type per profile): ("samples", "count") with period
 *                     type ("cpu" or "wall", "nanoseconds") and the period,
 *                     each -e event as (name, "count"), --objects as
 *                     pprof's heap types (alloc_objects, alloc_space,
 *                     inuse_objects, inuse_space); the window's start
 *                     (time_unix_nano) and length
 *   Sample            one per (stack, thread[, idle][, allocated type])
 *                     with a non-zero value: attributes thread.id,
 *                     thread.name, strata.state (idle|running, wall mode),
 *                     strata.alloc.type (--objects)
 *   dictionary        shared by the whole request, entry 0 of every table
 *                     the zero value as the spec asks: strings, functions
 *                     (name, file, first line), locations (a frame: lines
 *                     innermost first, as pprof's; attribute
 *                     profile.frame.type "cpython" or "native"), mappings
 *                     (a native or JIT object: its path, attribute
 *                     process.executable.build_id.gnu where recorded),
 *                     stacks (location indices, leaf first), attributes,
 *                     and the one zero link
 *
 * Native frame addresses are ELF addresses (what addr2line takes), as in
 * the pprof export; the model keeps no process address ranges, so the
 * mappings have none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "export.h"
#include "otlp.h"

#ifndef STRATA_VERSION
#define STRATA_VERSION "dev"
#endif

/* Field numbers, from the .proto files. */
enum {
	REQ_RESOURCE_PROFILES = 1, REQ_DICTIONARY = 2,
	RP_RESOURCE = 1, RP_SCOPE_PROFILES = 2,
	RES_ATTRIBUTES = 1,
	KV_KEY = 1, KV_VALUE = 2,
	AV_STRING = 1, AV_INT = 3,
	SP_SCOPE = 1, SP_PROFILES = 2,
	SCOPE_NAME = 1, SCOPE_VERSION = 2,
	PR_SAMPLE_TYPE = 1, PR_SAMPLES = 2, PR_TIME_UNIX_NANO = 3, PR_DURATION_NANO = 4, PR_PERIOD_TYPE = 5,
	PR_PERIOD = 6, PR_PROFILE_ID = 7,
	VT_TYPE = 1, VT_UNIT = 2,
	SA_STACK = 1, SA_ATTRIBUTES = 2, SA_VALUES = 4,
	DI_MAPPING = 1, DI_LOCATION = 2, DI_FUNCTION = 3, DI_LINK = 4, DI_STRING = 5, DI_ATTRIBUTE = 6, DI_STACK = 7,
	MA_FILENAME = 4, MA_ATTRIBUTES = 5,
	LO_MAPPING = 1, LO_ADDRESS = 2, LO_LINES = 3, LO_ATTRIBUTES = 4,
	LI_FUNCTION = 1, LI_LINE = 2,
	FN_NAME = 1, FN_FILENAME = 3, FN_START_LINE = 4,
	KU_KEY = 1, KU_VALUE = 2,
	ST_LOCATIONS = 1,
	LK_TRACE_ID = 1, LK_SPAN_ID = 2,
};

void otlp_service_name(const char *command, char *out, size_t n)
{
	char buf[4096];
	snprintf(buf, sizeof(buf), "%s", command ? command : "");
	char *save = NULL, *tok = strtok_r(buf, " ", &save);
	const char *prog = tok ? tok : "python";
	const char *name = NULL;
	int module = 0;
	while (tok && (tok = strtok_r(NULL, " ", &save))) {
		if (!strcmp(tok, "-m")) {
			module = 1;
			continue;
		}
		if (module) {
			name = tok;
			break;
		}
		if (!strcmp(tok, "-c"))
			break;
		/* Options of the interpreter that take a value. */
		if (!strcmp(tok, "-X") || !strcmp(tok, "-W")) {
			tok = strtok_r(NULL, " ", &save);
			continue;
		}
		if (tok[0] == '-')
			continue;
		name = tok;
		break;
	}
	if (!name)
		name = prog;
	const char *base = strrchr(name, '/');
	base = base && !module ? base + 1 : name;
	snprintf(out, n, "%s", base);
	size_t l = strlen(out);
	if (!module && l > 3 && !strcmp(out + l - 3, ".py"))
		out[l - 3] = 0;
	if (!*out)
		snprintf(out, n, "python");
}

/* ---- the encoder's state --------------------------------------------------- */

struct enc {
	const struct profile *p;
	struct strtab st;               /* the dictionary's strings */
	struct pb dict;                 /* the dictionary (its tables may interleave on the wire) */
	struct pb sub, sub2, sub3;
	struct strtab attrs;            /* attribute_table: "key\x1f" type value -> index */
	char **owned;                   /* those composite strings (attrs keeps pointers) */
	uint32_t nowned;
	uint32_t *func_idx;             /* per function: function_table index, 0 = not yet */
	uint32_t nfunc;
	uint32_t *loc_idx;              /* per frame: location_table index */
	uint32_t nloc;
	uint32_t *stack_idx;            /* per node: stack_table index */
	uint32_t nstack;
	struct strtab maps;             /* native and JIT objects -> mapping_table index */
	int oom;
};

/* An attribute_table entry (its key a literal): its index. Integers are
 * given as text with is_int set. */
static uint32_t attr(struct enc *e, const char *key, const char *val, int is_int)
{
	size_t kl = strlen(key), vl = strlen(val);
	char *c = malloc(kl + vl + 3);
	if (!c) {
		e->oom = 1;
		return 0;
	}
	memcpy(c, key, kl);
	c[kl] = '\x1f';
	c[kl + 1] = is_int ? 'i' : 's';
	memcpy(c + kl + 2, val, vl + 1);
	uint32_t before = e->attrs.n;
	int64_t id = str_id(&e->attrs, c);
	if (e->attrs.n == before) {
		free(c);
		return (uint32_t)id;
	}
	char **no = realloc(e->owned, (e->nowned + 1) * sizeof(*no));
	if (!no) {
		free(c);
		e->oom = 1;
		return (uint32_t)id;
	}
	e->owned = no;
	e->owned[e->nowned++] = c;
	/* KeyValueAndUnit: the key by string index, the value inline. */
	pb_uint(&e->sub2, KU_KEY, (uint64_t)str_id(&e->st, key));
	if (is_int)
		pb_uint(&e->sub3, AV_INT, strtoull(val, NULL, 10));
	else
		pb_bytes(&e->sub3, AV_STRING, c + kl + 2, vl);
	pb_msg(&e->sub2, KU_VALUE, &e->sub3);
	pb_msg(&e->dict, DI_ATTRIBUTE, &e->sub2);
	return (uint32_t)id;
}

static uint32_t attr_int(struct enc *e, const char *key, uint64_t v)
{
	char b[32];
	snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
	return attr(e, key, b, 1);
}

static uint32_t func_index(struct enc *e, uint32_t fn)
{
	if (e->func_idx[fn])
		return e->func_idx[fn];
	const struct pfunc *f = &e->p->funcs[fn];
	pb_uint(&e->sub, FN_NAME, (uint64_t)str_id(&e->st, f->name && *f->name ? f->name : "???"));
	pb_uint(&e->sub, FN_FILENAME, (uint64_t)str_id(&e->st, f->file));
	pb_uint(&e->sub, FN_START_LINE, f->line);
	pb_msg(&e->dict, DI_FUNCTION, &e->sub);
	return e->func_idx[fn] = ++e->nfunc;
}

/* The mapping of a native or JIT function's object (0: none). */
static uint32_t map_index(struct enc *e, const struct pfunc *f)
{
	if ((f->kind != PK_NATIVE && f->kind != PK_JIT) || !f->module || !*f->module)
		return 0;
	uint32_t before = e->maps.n;
	uint32_t id = (uint32_t)str_id(&e->maps, f->module);
	if (e->maps.n == before)
		return id;
	const char *bid = profile_build_id(e->p, f->module);
	uint32_t a = bid ? attr(e, "process.executable.build_id.gnu", bid, 0) : 0;
	pb_uint(&e->sub, MA_FILENAME, (uint64_t)str_id(&e->st, f->module));
	if (a) {
		pb_varint(&e->sub3, a);
		pb_msg(&e->sub, MA_ATTRIBUTES, &e->sub3);
	}
	pb_msg(&e->dict, DI_MAPPING, &e->sub);
	return id;
}

/* The location of frame f (the innermost of an inlined chain): its
 * lines innermost first, then the frames it is inlined into. */
static uint32_t loc_index(struct enc *e, uint32_t f)
{
	if (e->loc_idx[f])
		return e->loc_idx[f];
	const struct profile *p = e->p;
	const struct pframe *fr = &p->frames[f];
	const struct pfunc *fn = &p->funcs[fr->func];
	/* Functions and attributes first: they go to the dictionary as
	 * messages of their own, while this one is being built in sub. */
	uint32_t m = map_index(e, fn);
	uint32_t a = fn->kind == PK_PYTHON ? attr(e, "profile.frame.type", "cpython", 0)
		   : fn->kind == PK_OTHER ? 0 : attr(e, "profile.frame.type", "native", 0);
	for (uint32_t h = f; h != PNONE; h = p->frames[h].inlined_into)
		func_index(e, p->frames[h].func);
	pb_uint(&e->sub, LO_MAPPING, m);
	pb_uint(&e->sub, LO_ADDRESS, fr->addr);
	for (uint32_t h = f; h != PNONE; h = p->frames[h].inlined_into) {
		pb_uint(&e->sub2, LI_FUNCTION, e->func_idx[p->frames[h].func]);
		pb_uint(&e->sub2, LI_LINE, p->frames[h].line);
		pb_msg(&e->sub, LO_LINES, &e->sub2);
	}
	if (a) {
		pb_varint(&e->sub3, a);
		pb_msg(&e->sub, LO_ATTRIBUTES, &e->sub3);
	}
	pb_msg(&e->dict, DI_LOCATION, &e->sub);
	return e->loc_idx[f] = ++e->nloc;
}

static uint32_t stack_index(struct enc *e, uint32_t node)
{
	if (e->stack_idx[node])
		return e->stack_idx[node];
	const struct profile *p = e->p;
	struct pb locs = { 0 };
	for (uint32_t n = node; n != 0 && n != PNONE; n = p->nodes[n].parent) {
		uint32_t f = p->nodes[n].frame;
		pb_varint(&locs, loc_index(e, f));
		/* The frames it is inlined into are lines of the same location
		 * (they are its parents on every path). */
		for (uint32_t h = f; p->frames[h].inlined_into != PNONE;) {
			uint32_t up = p->nodes[n].parent;
			if (up == 0 || up == PNONE || p->nodes[up].frame != p->frames[h].inlined_into)
				break;
			n = up;
			h = p->nodes[n].frame;
		}
	}
	if (locs.oom)
		e->oom = 1;
	pb_bytes(&e->sub, ST_LOCATIONS, locs.d, locs.len);
	free(locs.d);
	pb_msg(&e->dict, DI_STACK, &e->sub);
	return e->stack_idx[node] = ++e->nstack;
}

/* ---- samples ---------------------------------------------------------------- */

/* Samples of one process aggregated per (leaf node, thread, idle, type). */
struct agg_sample {
	uint32_t node, thread, idle, type;
	uint32_t next;          /* next of the same node, or PNONE */
};

struct proc_samples {
	struct agg_sample *as;
	uint64_t *vals;         /* nevents per sample */
	uint64_t n, cap;
	uint32_t *head;         /* per node */
};

static int aggregate(const struct profile *p, uint32_t proc, int exclude_idle, struct proc_samples *ps)
{
	const uint32_t ne = p->nevents;
	int wall = p->mode == MODE_WALL;
	for (uint64_t i = 0; i < p->nsamples; i++) {
		const struct psample *s = &p->samples[i];
		if (p->threads[s->thread].process != proc)
			continue;
		int idle = (s->flags & PS_IDLE) != 0;
		if (exclude_idle && idle)
			continue;
		uint32_t type = (s->flags & PS_ALLOC) && s->type < p->ntypes ? s->type : PNONE;
		uint32_t slot;
		for (slot = ps->head[s->node]; slot != PNONE; slot = ps->as[slot].next)
			if (ps->as[slot].thread == s->thread && ps->as[slot].idle == (uint32_t)(wall && idle) &&
			    ps->as[slot].type == type)
				break;
		if (slot == PNONE) {
			if (ps->n == ps->cap) {
				uint64_t cap = ps->cap ? ps->cap * 2 : 1024;
				struct agg_sample *na = realloc(ps->as, cap * sizeof(*na));
				if (na)
					ps->as = na;
				uint64_t *nv = na ? realloc(ps->vals, cap * ne * sizeof(*nv)) : NULL;
				if (!na || !nv)
					return -1;
				ps->vals = nv;
				ps->cap = cap;
			}
			if (ps->n >= PNONE)
				return -1;
			slot = (uint32_t)ps->n++;
			ps->as[slot] = (struct agg_sample){ s->node, s->thread, (uint32_t)(wall && idle), type,
							    ps->head[s->node] };
			ps->head[s->node] = slot;
			memset(ps->vals + (size_t)slot * ne, 0, ne * sizeof(uint64_t));
		}
		uint64_t *v = ps->vals + (size_t)slot * ne;
		for (uint32_t ev = 0; ev < ne; ev++)
			v[ev] += profile_value(p, i, ev);
	}
	return 0;
}

static void value_type(struct enc *e, struct pb *into, uint32_t field, const char *type, const char *unit)
{
	pb_uint(&e->sub3, VT_TYPE, (uint64_t)str_id(&e->st, type));
	pb_uint(&e->sub3, VT_UNIT, (uint64_t)str_id(&e->st, unit));
	pb_msg(into, field, &e->sub3);
}

/* One Profile: event ev of process proc's aggregated samples, into sp
 * (a ScopeProfiles being built). */
static void put_profile(struct enc *e, const struct proc_samples *ps, uint32_t ev, struct pb *sp, struct pb *prof,
			struct pb *smp)
{
	const struct profile *p = e->p;
	static const char *const heap[4][2] = { { "alloc_objects", "count" }, { "alloc_space", "bytes" },
						{ "inuse_objects", "count" }, { "inuse_space", "bytes" } };
	if (p->obj_event && ev >= p->obj_event && ev < p->obj_event + 4)
		value_type(e, prof, PR_SAMPLE_TYPE, heap[ev - p->obj_event][0], heap[ev - p->obj_event][1]);
	else
		value_type(e, prof, PR_SAMPLE_TYPE, p->event_names[ev], "count");
	int wall = p->mode == MODE_WALL;
	for (uint64_t i = 0; i < ps->n; i++) {
		const struct agg_sample *a = &ps->as[i];
		uint64_t v = ps->vals[i * p->nevents + ev];
		if (!v)
			continue;
		const struct pthread_info *t = &p->threads[a->thread];
		uint32_t at[4], na = 0;
		at[na++] = attr_int(e, "thread.id", t->tid);
		if (t->name && *t->name)
			at[na++] = attr(e, "thread.name", t->name, 0);
		if (wall)
			at[na++] = attr(e, "strata.state", a->idle ? "idle" : "running", 0);
		if (a->type != PNONE)
			at[na++] = attr(e, "strata.alloc.type", p->types[a->type], 0);
		pb_uint(smp, SA_STACK, stack_index(e, a->node));
		for (uint32_t k = 0; k < na; k++)
			pb_varint(&e->sub3, at[k]);
		pb_msg(smp, SA_ATTRIBUTES, &e->sub3);
		pb_varint(&e->sub3, v);
		pb_msg(smp, SA_VALUES, &e->sub3);
		pb_msg(prof, PR_SAMPLES, smp);
	}
	pb_fixed64(prof, PR_TIME_UNIX_NANO, p->start_realtime_ns);
	if (p->end_ns > p->start_ns)
		pb_uint(prof, PR_DURATION_NANO, p->end_ns - p->start_ns);
	if (ev == 0) {
		/* Sampled by time: each sample stands for one period. With -e
		 * the first event drives sampling, every `period` of it. */
		const struct pevent_info *ei = p->nevents > 1 && p->event_info ? &p->event_info[1] : NULL;
		if (ei && ei->known && (ei->flags & EVD_SAMPLING) && !(ei->flags & EVD_CLOCK)) {
			value_type(e, prof, PR_PERIOD_TYPE, p->event_names[1], "count");
			pb_uint(prof, PR_PERIOD, ei->period);
		} else {
			value_type(e, prof, PR_PERIOD_TYPE, wall ? "wall" : "cpu", "nanoseconds");
			pb_uint(prof, PR_PERIOD, p->period_ns);
		}
	}
	uint8_t id[16];
	if (getrandom(id, sizeof(id), GRND_NONBLOCK) == (ssize_t)sizeof(id))
		pb_bytes(prof, PR_PROFILE_ID, id, sizeof(id));
	pb_msg(sp, SP_PROFILES, prof);
}

/* ---- resources -------------------------------------------------------------- */

static void kv(struct pb *res, struct pb *kvb, struct pb *val, const char *key, size_t kl, const char *s, int is_int)
{
	pb_bytes(kvb, KV_KEY, key, kl);
	if (is_int)
		pb_uint(val, AV_INT, strtoull(s, NULL, 10));
	else
		pb_bytes(val, AV_STRING, s, strlen(s));
	pb_msg(kvb, KV_VALUE, val);
	pb_msg(res, RES_ATTRIBUTES, kvb);
}

static void put_resource(struct enc *e, const struct otlp_opts *o, const struct pprocess *pr, struct pb *rp)
{
	const struct profile *p = e->p;
	struct pb res = { 0 }, kvb = { 0 }, val = { 0 };
	char svc[256], num[32];
	if (o->service && *o->service)
		snprintf(svc, sizeof(svc), "%s", o->service);
	else
		otlp_service_name(pr->command, svc, sizeof(svc));
	kv(&res, &kvb, &val, "service.name", 12, svc, 0);
	if (p->hostname && *p->hostname)
		kv(&res, &kvb, &val, "host.name", 9, p->hostname, 0);
	snprintf(num, sizeof(num), "%u", pr->pid);
	kv(&res, &kvb, &val, "process.pid", 11, num, 1);
	if (pr->ppid) {
		snprintf(num, sizeof(num), "%u", pr->ppid);
		kv(&res, &kvb, &val, "process.parent_pid", 18, num, 1);
	}
	if (pr->command && *pr->command)
		kv(&res, &kvb, &val, "process.command_line", 20, pr->command, 0);
	if (pr->executable && *pr->executable)
		kv(&res, &kvb, &val, "process.executable.path", 23, pr->executable, 0);
	kv(&res, &kvb, &val, "process.runtime.name", 20, "CPython", 0);
	if (pr->python_version && *pr->python_version)
		kv(&res, &kvb, &val, "process.runtime.version", 23, pr->python_version, 0);
	kv(&res, &kvb, &val, "telemetry.sdk.name", 18, "strata", 0);
	kv(&res, &kvb, &val, "telemetry.sdk.version", 21, STRATA_VERSION, 0);
	for (uint32_t i = 0; i < o->nattrs; i++) {
		const char *eq = strchr(o->attrs[i], '=');
		if (eq && eq > o->attrs[i])
			kv(&res, &kvb, &val, o->attrs[i], (size_t)(eq - o->attrs[i]), eq + 1, 0);
	}
	if (res.oom || kvb.oom || val.oom)
		e->oom = 1;
	pb_msg(rp, RP_RESOURCE, &res);
	free(res.d);
	free(kvb.d);
	free(val.d);
}

int otlp_encode(const struct profile *p, const struct otlp_opts *o, struct pb *out, char *err, size_t errlen)
{
	struct enc e = { .p = p };
	struct proc_samples ps = { 0 };
	struct pb rp = { 0 }, sp = { 0 }, prof = { 0 }, smp = { 0 }, scope = { 0 };
	int rc = -1;
	e.func_idx = calloc((size_t)p->nfuncs + 1, sizeof(uint32_t));
	e.loc_idx = calloc((size_t)p->nframes + 1, sizeof(uint32_t));
	e.stack_idx = calloc((size_t)p->nnodes + 1, sizeof(uint32_t));
	ps.head = malloc(((size_t)p->nnodes + 1) * sizeof(uint32_t));
	if (!e.func_idx || !e.loc_idx || !e.stack_idx || !ps.head)
		goto oom;
	/* Entry 0 of every table is its zero value. */
	str_id(&e.st, "");
	str_id(&e.attrs, "");
	str_id(&e.maps, "");
	pb_bytes(&e.dict, DI_MAPPING, NULL, 0);
	pb_bytes(&e.dict, DI_LOCATION, NULL, 0);
	pb_bytes(&e.dict, DI_FUNCTION, NULL, 0);
	pb_bytes(&e.dict, DI_ATTRIBUTE, NULL, 0);
	pb_bytes(&e.dict, DI_STACK, NULL, 0);
	static const uint8_t zero[16];
	pb_bytes(&e.sub, LK_TRACE_ID, zero, 16);
	pb_bytes(&e.sub, LK_SPAN_ID, zero, 8);
	pb_msg(&e.dict, DI_LINK, &e.sub);

	pb_bytes(&scope, SCOPE_NAME, "strata", 6);
	pb_bytes(&scope, SCOPE_VERSION, STRATA_VERSION, strlen(STRATA_VERSION));
	for (uint32_t pr = 0; pr < p->nprocs; pr++) {
		const struct pprocess *proc = &p->procs[pr];
		if (proc->flags & PROC_UNSUPPORTED)
			continue;
		memset(ps.head, 0xff, ((size_t)p->nnodes + 1) * sizeof(uint32_t));
		ps.n = 0;
		if (aggregate(p, pr, o->exclude_idle, &ps))
			goto oom;
		if (!ps.n)
			continue;
		put_resource(&e, o, proc, &rp);
		pb_bytes(&sp, SP_SCOPE, scope.d, scope.len);
		for (uint32_t ev = 0; ev < p->nevents; ev++)
			put_profile(&e, &ps, ev, &sp, &prof, &smp);
		pb_msg(&rp, RP_SCOPE_PROFILES, &sp);
		pb_msg(out, REQ_RESOURCE_PROFILES, &rp);
		if (out->oom || e.oom)
			goto oom;
	}
	for (uint32_t i = 0; i < e.st.n; i++)
		pb_bytes(&e.dict, DI_STRING, e.st.s[i], strlen(e.st.s[i]));
	pb_msg(out, REQ_DICTIONARY, &e.dict);
	if (out->oom || e.oom || e.st.oom || e.attrs.oom || e.maps.oom || e.dict.oom || e.sub.oom || e.sub2.oom ||
	    e.sub3.oom || rp.oom || sp.oom || prof.oom || smp.oom)
		goto oom;
	rc = 0;
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
done:
	strtab_free(&e.st);
	strtab_free(&e.attrs);
	strtab_free(&e.maps);
	for (uint32_t i = 0; i < e.nowned; i++)
		free(e.owned[i]);
	free(e.owned);
	free(e.dict.d);
	free(e.sub.d);
	free(e.sub2.d);
	free(e.sub3.d);
	free(e.func_idx);
	free(e.loc_idx);
	free(e.stack_idx);
	free(ps.as);
	free(ps.vals);
	free(ps.head);
	free(rp.d);
	free(sp.d);
	free(prof.d);
	free(smp.d);
	free(scope.d);
	return rc;
}

/* `-f otlp`: the request's protobuf bytes, as the sender posts them
 * (uncompressed). */
int export_otlp(const struct profile *p, FILE *out, const struct export_opts *o, char *err, size_t errlen)
{
	struct otlp_opts oo = { .exclude_idle = o->exclude_idle };
	struct pb b = { 0 };
	int rc = otlp_encode(p, &oo, &b, err, errlen);
	if (!rc && b.len && fwrite(b.d, 1, b.len, out) != b.len) {
		snprintf(err, errlen, "write error");
		rc = -1;
	}
	free(b.d);
	return rc;
}
