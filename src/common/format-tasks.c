/*
 * format-tasks.c — the asyncio task record (format 1.2): a task's name,
 * interned per stream, which the task boundaries of REC_STACK refer to
 * (format.c). The prose spec is docs/format.md, "Tasks".
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
