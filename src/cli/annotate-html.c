/*
 * annotate-html.c — `strata annotate -f html -o DIR`: the source heat map
 * (src/export/heatmap.c), and with --diff BASE its differential form; the
 * options that only go with it are checked here (annotate.h).
 */
#include <stdio.h>
#include <string.h>

#include "annotate.h"
#include "builtin.h"
#include "export/export.h"
#include "export/heatmap.h"
#include "lib/diff.h"

int annotate_html_usage(const struct annotate_opts *o)
{
	const char *only_html = o->out_dir ? "-o" : o->native ? "--native" : o->diff ? "--diff" : NULL;
	if (!o->html && only_html) {
		errorf("%s goes with -f html (the heat map)%s", only_html,
		       o->diff ? "; strata diff compares in the terminal" : "");
		return 1;
	}
	if ((o->absolute || o->nstrip) && !o->diff) {
		errorf("%s only goes with --diff BASE", o->absolute ? "--absolute" : "--strip-prefix");
		return 1;
	}
	if (!o->html)
		return 0;
	if (!o->out_dir) {
		errorf("-f html writes a directory: give it with -o DIR");
		return 1;
	}
	if (o->json || o->asm_) {
		errorf("-f html does not go with %s", o->json ? "--json" : "--asm");
		return 1;
	}
	if (o->diff && (o->pid || o->tid)) {
		/* A process or thread id of one recording names nothing in the
		 * other. */
		errorf("--diff does not go with -p/-t: ids differ between runs (strata diff --pid BASE,NEW compares "
		       "one process)");
		return 1;
	}
	return 0;
}

int annotate_html(const struct ctx *c, const struct agg_filter *f, const struct view *start)
{
	const struct annotate_opts *o = c->o;
	struct heatmap_opts ho = { .title = c->p->command, .event = o->event, .filter = f, .native = o->native,
				   .start_func = PNONE };
	if (start && start->function)
		ho.start_func = start->func;
	else if (start)
		ho.start_path = start->file->path;
	struct profile *base = NULL;
	struct diff_match *m = NULL;
	struct export_diff d;
	struct diff_match_opts mo = { o->strip, o->nstrip };
	int rc = 0;
	if (o->diff) {
		struct load_opts lo = { 0 };
		rc = diff_setup(c->p, o->path, o->diff, &lo, o->type, c->p->event_names[o->event], o->absolute, &mo,
				&base, &m, &d);
		ho.diff = &d;
	}
	char err[512];
	if (!rc && heatmap_write(c->p, &ho, o->out_dir, err, sizeof(err))) {
		errorf("%s", err);
		rc = 1;
	}
	if (!rc)
		printf("%s/index.html\n", o->out_dir);
	diff_match_free(m);
	profile_free(base);
	return rc;
}
