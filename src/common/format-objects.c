/*
 * format-objects.c — the records of object and allocation samples
 * (format 1.1, `strata record --objects`): interned type names, sampled
 * allocations with their stack, types learnt later, and frees. The prose
 * spec is docs/format.md, "Objects".
 */
#include <stdlib.h>
#include <string.h>

#include "format.h"

const char *alloc_domain_name(uint32_t domain)
{
	switch (domain) {
	case ALLOC_RAW: return "[PyMem_RawMalloc]";
	case ALLOC_MEM: return "[PyMem_Malloc]";
	case ALLOC_OBJ: return "[PyObject_Malloc]";
	case ALLOC_MALLOC: return "[malloc]";
	default: return "[allocation]";
	}
}

/* Record bodies are small: built in a scratch buffer so the length prefix
 * is exact (as format.c does). */
#define BODY(b, type, fill)                                   \
	do {                                                  \
		struct wbuf o_;                               \
		wbuf_init(&o_);                               \
		struct wbuf *o = &o_;                         \
		fill;                                         \
		if (o->oom)                                   \
			(b)->oom = 1;                         \
		else                                          \
			rec_put_raw((b), (type), o->data, o->len); \
		wbuf_free(o);                                 \
	} while (0)

void rec_put_obj_type(struct wbuf *b, const struct rec_obj_type *r)
{
	BODY(b, REC_OBJ_TYPE, {
		wbuf_uv(o, r->index);
		wbuf_str(o, r->name);
	});
}

void rec_put_alloc(struct wbuf *b, const struct rec_alloc *r)
{
	BODY(b, REC_ALLOC, {
		wbuf_uv(o, r->tid);
		wbuf_sv(o, r->dt_ns);
		wbuf_uv(o, r->stack);
		wbuf_uv(o, r->id);
		wbuf_uv(o, r->size);
		wbuf_uv(o, r->domain);
		wbuf_uv(o, r->flags);
		wbuf_uv(o, r->type);
	});
}

void rec_put_alloc_type(struct wbuf *b, const struct rec_alloc_type *r)
{
	BODY(b, REC_ALLOC_TYPE, {
		wbuf_uv(o, r->id);
		wbuf_uv(o, r->type);
	});
}

void rec_put_free(struct wbuf *b, const struct rec_free *r)
{
	BODY(b, REC_FREE, {
		wbuf_uv(o, r->id);
		wbuf_uv(o, r->time_ns);
	});
}

static uint32_t u32(struct rbuf *b)
{
	uint64_t v = rbuf_uv(b);
	if (v > UINT32_MAX)
		b->err = 1;
	return (uint32_t)v;
}

int rec_get_obj_type(struct rbuf *b, struct rec_obj_type *r)
{
	memset(r, 0, sizeof(*r));
	r->index = u32(b);
	r->name = rbuf_strdup(b);
	if (b->err || !r->index) {
		free(r->name);
		r->name = NULL;
		return -1;
	}
	return 0;
}

int rec_get_alloc(struct rbuf *b, struct rec_alloc *r)
{
	memset(r, 0, sizeof(*r));
	r->tid = u32(b);
	r->dt_ns = rbuf_sv(b);
	r->stack = u32(b);
	r->id = rbuf_uv(b);
	r->size = rbuf_uv(b);
	r->domain = u32(b);
	r->flags = u32(b);
	r->type = u32(b);
	return b->err ? -1 : 0;
}

int rec_get_alloc_type(struct rbuf *b, struct rec_alloc_type *r)
{
	memset(r, 0, sizeof(*r));
	r->id = rbuf_uv(b);
	r->type = u32(b);
	return b->err ? -1 : 0;
}

int rec_get_free(struct rbuf *b, struct rec_free *r)
{
	memset(r, 0, sizeof(*r));
	r->id = rbuf_uv(b);
	r->time_ns = rbuf_uv(b);
	return b->err ? -1 : 0;
}
