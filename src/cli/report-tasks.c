/*
 * report-tasks.c — `strata report`'s tasks table and the JSON "tasks"
 * list: per asyncio task, the samples it ran and, in wall mode, the
 * samples it waited, with the await point it waited at most
 * (docs/async.md).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report-tasks.h"

static void clean(char *s)
{
	/* Names come from the program: no control characters. */
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

static void where(const struct profile *p, uint32_t frame, char *out, size_t n)
{
	if (frame == PNONE) {
		snprintf(out, n, "-");
		return;
	}
	const struct pframe *fr = &p->frames[frame];
	const struct pfunc *fn = &p->funcs[fr->func];
	const char *file = fn->file && *fn->file ? strrchr(fn->file, '/') : NULL;
	file = file ? file + 1 : fn->file;
	if (file && *file)
		snprintf(out, n, "%s (%s:%u)", fn->name, file, fr->line);
	else
		snprintf(out, n, "%s", fn->name);
	clean(out);
}

void report_tasks_text(const struct profile *p, const struct agg_filter *f, int limit)
{
	uint32_t n;
	struct ptask_row *rows = profile_tasks(p, f, &n);
	if (!p->ntasks || !rows) {
		free(rows);
		return;
	}
	int wall = p->mode == MODE_WALL;
	printf("\nasyncio tasks%s\n", wall ? " (running: on the thread; waiting: suspended, at the await shown)" : "");
	printf("%9s %9s  %-24s %s\n", "running", wall ? "waiting" : "", "task", wall ? "top await point (samples)" : "");
	for (uint32_t i = 0; i < n && (!limit || i < (uint32_t)limit); i++) {
		const struct ptask_row *r = &rows[i];
		char name[200], w[400] = "";
		snprintf(name, sizeof(name), "%s", p->tasks[r->task]);
		clean(name);
		if (wall && r->top_wait != PNONE) {
			char at[360];
			where(p, r->top_wait, at, sizeof(at));
			snprintf(w, sizeof(w), "%s (%" PRIu64 ")", at, r->top_wait_samples);
		}
		if (wall)
			printf("%9" PRIu64 " %9" PRIu64 "  %-24s %s\n", r->running, r->waiting, name, w);
		else
			printf("%9" PRIu64 " %9s  %s\n", r->running, "", name);
	}
	if (limit && n > (uint32_t)limit)
		printf("  ... %u more tasks (--limit 0 shows all)\n", n - (uint32_t)limit);
	free(rows);
}

void report_tasks_json(const struct profile *p, const struct agg_filter *f, struct json *j)
{
	uint32_t n;
	struct ptask_row *rows = profile_tasks(p, f, &n);
	json_key(j, "tasks");
	json_array_begin(j);
	for (uint32_t i = 0; i < n; i++) {
		const struct ptask_row *r = &rows[i];
		json_object_begin(j);
		json_key(j, "task");
		json_string(j, p->tasks[r->task]);
		json_key(j, "running");
		json_uint(j, r->running);
		json_key(j, "waiting");
		json_uint(j, r->waiting);
		if (r->top_wait != PNONE) {
			const struct pframe *fr = &p->frames[r->top_wait];
			const struct pfunc *fn = &p->funcs[fr->func];
			json_key(j, "top-wait");
			json_object_begin(j);
			json_key(j, "function");
			json_string(j, fn->name);
			json_key(j, "file");
			json_string(j, fn->file ? fn->file : "");
			json_key(j, "line");
			json_uint(j, fr->line);
			json_key(j, "samples");
			json_uint(j, r->top_wait_samples);
			json_object_end(j);
		}
		json_object_end(j);
	}
	json_array_end(j);
	free(rows);
}
