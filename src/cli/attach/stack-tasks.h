/*
 * stack-tasks.h — `strata stack`'s asyncio tasks (stack-tasks.c): every
 * pending task of the process, its await chain and the tasks awaiting it,
 * read from outside through the reader module like the threads' stacks,
 * and printed as a tree (each task under the task that awaits it) or as
 * JSON.
 */
#ifndef STRATA_STACK_TASKS_H
#define STRATA_STACK_TASKS_H

#include <stddef.h>
#include <stdint.h>

#include "cli/attach/pyproc.h"
#include "lib/json.h"

#define STASK_FRAMES 64
#define STASK_AWAITERS 8

struct stask {
	uint64_t addr;
	char name[128];
	int running;              /* its coroutine is executing (on a thread) now */
	uint64_t awaits;          /* what it is suspended on, a task or future: 0 if none */
	int awaits_task;
	int nawaiters;            /* the tasks awaiting it (the first is its parent in the tree) */
	uint64_t awaiters[STASK_AWAITERS];
	int n;                    /* its coroutine chain, leaf (innermost) first */
	struct strata_pyframe fr[STASK_FRAMES];
};

struct stasks {
	int state;                /* 0 asyncio not in use, 1 read, -1 not readable (why) */
	char why[512];
	struct stask *t;
	int n;
	int more;                 /* pending tasks beyond the cap, not read */
};

/* One frame as the caller names it (builtin-stack.c). */
struct stask_view {
	const char *func, *file;
	int line;
};
typedef void (*stask_frame_fn)(struct pyproc *p, const struct strata_pyframe *f, struct stask_view *v);

/* Reads every pending task of the process (up to a cap) while it is held;
 * code objects are named later, through view. 0 (see out->state), or -1
 * on a memory shortage. */
int stack_tasks_read(struct pyproc *p, struct stasks *out);
void stack_tasks_text(const struct stasks *ts, struct pyproc *p, stask_frame_fn view);
void stack_tasks_json(const struct stasks *ts, struct pyproc *p, stask_frame_fn view, struct json *j);
void stack_tasks_free(struct stasks *ts);

#endif
