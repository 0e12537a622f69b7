/*
 * annotate.h — what the pieces of `strata annotate` share: its options,
 * the blocks of source it shows (views) and the context both outputs read
 * (builtin-annotate.c: options, selection and the terminal; annotate-json.c:
 * the JSON).
 */
#ifndef STRATA_ANNOTATE_H
#define STRATA_ANNOTATE_H

#include <limits.h>
#include <stdint.h>

#include "lib/json.h"
#include "lib/linecost.h"
#include "lib/profile.h"
#include "lib/ratios.h"
#include "lib/source.h"

struct jasm;

struct annotate_opts {
	int json, full, color;
	int context;
	uint32_t event;
	const char *event_name;
	const char *type;
	const char *target;
	uint32_t pid, tid;
	int no_idle;
	int asm_;
	const char *path;
	/* -f html: a heat map directory */
	int html;
	const char *out_dir;
	int native;
	const char *diff;          /* --diff BASE */
	int absolute;
	const char *strip[64];     /* --strip-prefix */
	uint32_t nstrip;
};

/* One block of source to show: lines [first, last] of a file (last 0:
 * to the end), every line or only those near a cost. */
struct view {
	const struct lc_file *file;
	uint32_t first, last;
	int full;
	const char *function;  /* the function asked for, or NULL */
	uint32_t func;         /* its index (when function is set) */
};

struct ctx {
	const struct profile *p;
	const struct linecost *lc;
	const struct agg *agg;     /* per function, for a FUNCTION's own cost */
	const struct annotate_opts *o;
	struct source_cache *src;
	struct ratio rt[RATIOS_MAX];
	uint32_t nr;
	char cwd[PATH_MAX];
	struct jasm *jasm;         /* --asm */
};

static inline double pct(uint64_t v, uint64_t total) { return total ? 100.0 * (double)v / (double)total : 0.0; }

/* builtin-annotate.c: a function's own row of c->agg, NULL if none; the
 * samples of a view's self that ran in the garbage collector. */
const struct agg_row *func_row(const struct ctx *c, uint32_t func);
uint64_t view_gc(const struct view *v);

/* annotate-json.c: the views as one JSON object on stdout; 0, or -1 if it
 * could not be written. */
int annotate_json(const struct ctx *c, const struct view *v, int n);

/* annotate-html.c: whether the -f html options go together (1 after a
 * one-line error: bad usage); the heat map of c's profile written (start:
 * the view it opens at, or NULL), returning the exit status. */
int annotate_html_usage(const struct annotate_opts *o);
int annotate_html(const struct ctx *c, const struct agg_filter *f, const struct view *start);

#endif
