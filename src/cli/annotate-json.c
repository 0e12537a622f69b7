/*
 * annotate-json.c — `strata annotate --json`: the views of builtin-annotate.c
 * as one JSON object, every line with a cost and every event (annotate.h).
 */
#include <stdio.h>

#include "annotate.h"
#include "lib/json.h"

/* ---- JSON -------------------------------------------------------------- */

static void json_costs(const struct ctx *c, const uint64_t *self, const uint64_t *total, uint64_t gc,
		       struct json *j)
{
	const struct profile *p = c->p;
	uint64_t all = c->lc->totals[0];
	json_key(j, "self");
	json_uint(j, self[0]);
	json_key(j, "total");
	json_uint(j, total[0]);
	json_key(j, "gc"); /* of self, samples in the garbage collector */
	json_uint(j, gc);
	json_key(j, "self_pct");
	json_double(j, pct(self[0], all));
	json_key(j, "total_pct");
	json_double(j, pct(total[0], all));
	if (p->nevents > 1) {
		json_key(j, "events");
		json_object_begin(j);
		for (uint32_t e = 1; e < p->nevents; e++) {
			json_key(j, p->event_names[e]);
			json_object_begin(j);
			json_key(j, "self");
			json_uint(j, self[e]);
			json_key(j, "total");
			json_uint(j, total[e]);
			json_object_end(j);
		}
		json_object_end(j);
	}
	if (c->nr) {
		json_key(j, "ratios");
		json_object_begin(j);
		for (uint32_t i = 0; i < c->nr; i++) {
			double r = ratio_value(&c->rt[i], self);
			json_key(j, c->rt[i].key);
			if (r < 0)
				json_null(j);
			else
				json_double(j, r);
		}
		json_object_end(j);
	}
}

static void json_view(const struct ctx *c, const struct view *v, struct json *j)
{
	const struct lc_file *lf = v->file;
	json_object_begin(j);
	json_key(j, "file");
	json_string(j, lf->path);
	json_key(j, "function");
	if (v->function)
		json_string(j, v->function);
	else
		json_null(j);
	json_key(j, "first_line");
	json_uint(j, v->first);
	json_key(j, "last_line");
	if (v->last)
		json_uint(j, v->last);
	else
		json_null(j);
	const uint64_t *hs = lf->self, *ht = lf->total;
	if (v->function) {
		const struct agg_row *r = func_row(c, v->func);
		if (r)
			hs = r->self, ht = r->total;
	}
	json_costs(c, hs, ht, view_gc(v), j);
	json_key(j, "source_available");
	json_bool(j, source_nlines(c->src, lf->path) >= 0);
	json_key(j, "lines");
	json_array_begin(j);
	for (uint32_t k = 0; k < lf->nlines; k++) {
		const struct lc_line *l = &lf->lines[k];
		if (l->line < v->first || (v->last && l->line > v->last))
			continue;
		json_object_begin(j);
		json_key(j, "line");
		json_uint(j, l->line);
		json_key(j, "function");
		json_string(j, c->p->funcs[l->func].name);
		json_key(j, "kind"); /* "jit": the line's samples ran in JIT-compiled code */
		json_string(j, pkind_name(c->p->funcs[l->func].kind));
		json_costs(c, l->self, l->total, l->gc[0], j);
		json_key(j, "source");
		const char *text;
		size_t tlen;
		if (source_line(c->src, lf->path, l->line, &text, &tlen) == 0)
			json_string_len(j, text, tlen);
		else
			json_null(j);
		json_object_end(j);
	}
	json_array_end(j);
	json_object_end(j);
}

int annotate_json(const struct ctx *c, const struct view *v, int n)
{
	const struct profile *p = c->p;
	struct json j;
	json_init(&j, stdout, 2);
	json_object_begin(&j);
	json_key(&j, "samples");
	json_uint(&j, c->lc->totals[0]);
	json_key(&j, "gc");
	json_uint(&j, c->lc->gc[0]);
	json_key(&j, "command");
	json_string(&j, p->command ? p->command : "");
	json_key(&j, "events");
	json_array_begin(&j);
	for (uint32_t e = 1; e < p->nevents; e++) {
		json_object_begin(&j);
		json_key(&j, "name");
		json_string(&j, p->event_names[e]);
		json_key(&j, "total");
		json_uint(&j, c->lc->totals[e]);
		json_object_end(&j);
	}
	json_array_end(&j);
	json_key(&j, "ratios");
	json_array_begin(&j);
	for (uint32_t i = 0; i < c->nr; i++)
		json_string(&j, c->rt[i].key);
	json_array_end(&j);
	json_key(&j, "warnings");
	json_array_begin(&j);
	for (uint32_t i = 0; i < p->nwarnings; i++)
		json_string(&j, p->warnings[i]);
	json_array_end(&j);
	json_key(&j, "files");
	json_array_begin(&j);
	for (int i = 0; i < n; i++)
		json_view(c, &v[i], &j);
	json_array_end(&j);
	json_object_end(&j);
	return json_finish(&j);
}
