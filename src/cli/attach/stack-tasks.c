/*
 * stack-tasks.c — see stack-tasks.h (docs/async.md, "strata stack").
 *
 * Read while the process is held, with the reader module's asyncio entries
 * (pyasync-read.c, the same the agent's helper uses): where asyncio keeps
 * its tasks (on 3.14+ through the _asyncio module's debug offsets, found in
 * its .AsyncioDebug section), then every pending task in turn, its
 * coroutine chain and who awaits it. Printed after the process is let go,
 * like `python -m asyncio pstree` (which needs 3.14+ on both sides): each
 * task under the task that awaits it, its coroutines outermost first.
 */
#include "stack-tasks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TASKS 4096

int stack_tasks_read(struct pyproc *p, struct stasks *out)
{
	memset(out, 0, sizeof(*out));
	const struct strata_pyreader *r = p->reader;
	if (!r->asyncio_find || !r->tasks_next)
		return 0;
	struct strata_asyncref a;
	int rc = r->asyncio_find(0, &a, out->why, sizeof(out->why));
	if (rc == 2) {
		uint64_t at = 0, size = 0;
		if (pyproc_section(p->pid, ".AsyncioDebug", &at, &size) || size < 13 * 8)
			at = UINT64_MAX;
		rc = r->asyncio_find(at, &a, out->why, sizeof(out->why));
	}
	if (rc == 1)
		return 0; /* asyncio not imported */
	if (rc != 0) {
		out->state = -1;
		return 0;
	}
	out->state = 1;
	struct strata_taskcursor c = { 0 };
	uint64_t batch[256];
	int wrapped = 0, cap = 0;
	for (int rounds = 0; !wrapped && rounds < MAX_TASKS / 64 + 64; rounds++) {
		int n = r->tasks_next(&a, &c, batch, 256, &wrapped);
		if (n < 0) {
			/* A task went away under the cursor (--nonblocking). */
			snprintf(out->why, sizeof(out->why), "the list of tasks changed while being read");
			break;
		}
		for (int i = 0; i < n; i++) {
			if (out->n >= MAX_TASKS) {
				out->more++;
				continue;
			}
			if (out->n == cap) {
				cap = cap ? cap * 2 : 64;
				struct stask *t = realloc(out->t, (size_t)cap * sizeof(*t));
				if (!t)
					return -1;
				out->t = t;
			}
			struct stask *t = &out->t[out->n];
			memset(t, 0, sizeof(*t));
			struct strata_taskinfo info;
			int m = r->task_read(&a, batch[i], 1, &info, t->fr, STASK_FRAMES);
			if (m < 0)
				continue;
			t->addr = batch[i];
			t->n = m;
			t->running = info.running;
			t->awaits = info.awaits;
			t->awaits_task = info.awaits_task;
			snprintf(t->name, sizeof(t->name), "%s", info.name);
			int na = r->task_awaiters(&a, batch[i], t->awaiters, STASK_AWAITERS);
			t->nawaiters = na > 0 ? na : 0;
			out->n++;
		}
	}
	return 0;
}

void stack_tasks_free(struct stasks *ts)
{
	free(ts->t);
	memset(ts, 0, sizeof(*ts));
}

static int find(const struct stasks *ts, uint64_t addr)
{
	for (int i = 0; i < ts->n; i++)
		if (ts->t[i].addr == addr)
			return i;
	return -1;
}

/* The task a task is shown under: its first awaiter that was read. */
static int parent_of(const struct stasks *ts, const struct stask *t)
{
	for (int k = 0; k < t->nawaiters; k++) {
		int i = find(ts, t->awaiters[k]);
		if (i >= 0)
			return i;
	}
	return -1;
}

static void clean(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

static void print_task(const struct stasks *ts, int i, int depth, struct pyproc *p, stask_frame_fn view,
		       const int *parent, char *seen)
{
	const struct stask *t = &ts->t[i];
	seen[i] = 1;
	char name[sizeof(t->name)];
	snprintf(name, sizeof(name), "%s", t->name);
	clean(name);
	int indent = 2 + 4 * depth;
	printf("%*s%s (%s", indent, "", name, t->running ? "running" : "waiting");
	if (!t->running && t->awaits_task) {
		int a = find(ts, t->awaits);
		if (a >= 0) {
			char an[sizeof(t->name)];
			snprintf(an, sizeof(an), "%s", ts->t[a].name);
			clean(an);
			printf(" for task %s", an);
		}
	}
	printf(")");
	if (t->nawaiters > 1) {
		printf(", also awaited by");
		for (int k = 1; k < t->nawaiters; k++) {
			int a = find(ts, t->awaiters[k]);
			char an[sizeof(t->name)];
			snprintf(an, sizeof(an), "%s", a >= 0 ? ts->t[a].name : "?");
			clean(an);
			printf("%s %s", k > 1 ? "," : "", an);
		}
	}
	printf("\n");
	/* Its coroutines, outermost first (the await chain it is suspended
	 * in, down to where it waits or runs). */
	for (int k = t->n - 1; k >= 0; k--) {
		struct stask_view v;
		view(p, &t->fr[k], &v);
		if (v.line > 0)
			printf("%*s  %s (%s:%d)\n", indent, "", v.func, v.file ? v.file : "?", v.line);
		else
			printf("%*s  %s (%s)\n", indent, "", v.func, v.file ? v.file : "?");
	}
	for (int c = 0; c < ts->n; c++)
		if (parent[c] == i && !seen[c])
			print_task(ts, c, depth + 1, p, view, parent, seen);
}

void stack_tasks_text(const struct stasks *ts, struct pyproc *p, stask_frame_fn view)
{
	if (ts->state == 0)
		return;
	if (ts->state < 0) {
		printf("\nasyncio tasks: not shown (%s)\n", ts->why);
		return;
	}
	printf("\nasyncio tasks: %d pending%s, each under the task that awaits it, its coroutines outermost first\n",
	       ts->n + ts->more, ts->n ? "" : " (no task)");
	int *parent = malloc(((size_t)ts->n + 1) * sizeof(int));
	char *seen = calloc((size_t)ts->n + 1, 1);
	if (!parent || !seen) {
		free(parent);
		free(seen);
		return;
	}
	for (int i = 0; i < ts->n; i++)
		parent[i] = parent_of(ts, &ts->t[i]);
	for (int i = 0; i < ts->n; i++)
		if (parent[i] < 0)
			print_task(ts, i, 0, p, view, parent, seen);
	/* A cycle of awaiters has no root: each of its tasks from the first. */
	for (int i = 0; i < ts->n; i++)
		if (!seen[i])
			print_task(ts, i, 0, p, view, parent, seen);
	if (ts->more)
		printf("  ... %d more tasks not read\n", ts->more);
	free(parent);
	free(seen);
}

void stack_tasks_json(const struct stasks *ts, struct pyproc *p, stask_frame_fn view, struct json *j)
{
	json_key(j, "tasks");
	if (ts->state <= 0) {
		json_null(j);
		if (ts->state < 0) {
			json_key(j, "tasks_not_shown");
			json_string(j, ts->why);
		}
		return;
	}
	json_array_begin(j);
	for (int i = 0; i < ts->n; i++) {
		const struct stask *t = &ts->t[i];
		json_object_begin(j);
		json_key(j, "name");
		json_string(j, t->name);
		json_key(j, "address");
		json_uint(j, t->addr);
		json_key(j, "state");
		json_string(j, t->running ? "running" : "waiting");
		json_key(j, "awaits_task");
		if (t->awaits_task)
			json_uint(j, t->awaits);
		else
			json_null(j);
		json_key(j, "awaited_by");
		json_array_begin(j);
		for (int k = 0; k < t->nawaiters; k++)
			json_uint(j, t->awaiters[k]);
		json_array_end(j);
		json_key(j, "frames");
		json_array_begin(j);
		for (int k = t->n - 1; k >= 0; k--) {
			struct stask_view v;
			view(p, &t->fr[k], &v);
			json_object_begin(j);
			json_key(j, "function");
			json_string(j, v.func);
			json_key(j, "file");
			json_string(j, v.file);
			json_key(j, "line");
			if (v.line > 0)
				json_int(j, v.line);
			else
				json_null(j);
			json_object_end(j);
		}
		json_array_end(j);
		json_object_end(j);
	}
	json_array_end(j);
	if (ts->more) {
		json_key(j, "tasks_not_read");
		json_int(j, ts->more);
	}
}
