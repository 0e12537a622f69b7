/*
 * format-tasks.c — the asyncio task record (format 1.2): a task's name,
 * interned per stream, which the task boundaries of REC_STACK refer to
 * (format.c); and the names of why a blocked thread waited (1.3,
 * SAMPLE.wait). The prose spec is docs/format.md, "Tasks" and "Why a
 * thread waited".
 */
#include <stdlib.h>
#include <string.h>

#include "format.h"

void rec_put_task(struct wbuf *b, const struct rec_task *r)
{
	struct wbuf o;
	wbuf_init(&o);
	wbuf_uv(&o, r->index);
	wbuf_uv(&o, r->addr);
	wbuf_str(&o, r->name ? r->name : "");
	if (o.oom)
		b->oom = 1;
	else
		rec_put_raw(b, REC_TASK, o.data, o.len);
	wbuf_free(&o);
}

int rec_get_task(struct rbuf *b, struct rec_task *r)
{
	memset(r, 0, sizeof(*r));
	uint64_t ix = rbuf_uv(b);
	r->index = (uint32_t)ix;
	r->addr = rbuf_uv(b);
	r->name = rbuf_strdup(b);
	if (b->err || ix > UINT32_MAX || !r->name) {
		free(r->name);
		r->name = NULL;
		return -1;
	}
	return 0;
}

const char *wait_reason_frame(uint32_t w)
{
	switch (w) {
	case WAITR_GIL: return "[waiting for the GIL]";
	case WAITR_IO: return "[in I/O]";
	case WAITR_POLL: return "[in select/poll]";
	case WAITR_SLEEP: return "[sleeping]";
	case WAITR_LOCK: return "[waiting on a lock or condition]";
	case WAITR_CHILD: return "[waiting for a child process]";
	case WAITR_SIGNAL: return "[waiting for a signal]";
	case WAITR_SYSCALL: return "[in another system call]";
	case WAITR_NOSYSCALL: return "[blocked outside a system call]";
	default: return NULL;
	}
}

const char *wait_reason_short(uint32_t w)
{
	static const char *const words[] = { "?", "GIL", "I/O", "select/poll", "sleep", "lock", "child", "signal",
					     "syscall", "no syscall" };
	return w <= WAITR_MAX_KNOWN ? words[w] : "?";
}

const char *wait_reason_key(uint32_t w)
{
	static const char *const keys[] = { NULL, "gil", "io", "poll", "sleep", "lock", "child", "signal", "syscall",
					    "nosyscall" };
	return w <= WAITR_MAX_KNOWN ? keys[w] : NULL;
}
