/*
 * report-types.c — `strata report`'s types table and the JSON "types"
 * list: what a recording with --objects allocated, by type (docs/objects.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report-types.h"

static void human(char *out, size_t n, uint64_t v)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = (double)v;
	unsigned u = 0;
	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, n, "%llu B", (unsigned long long)v);
	else
		snprintf(out, n, "%.1f %s", d, unit[u]);
}

void report_types_text(const struct profile *p, const struct agg_filter *f, int limit)
{
	uint32_t n;
	struct ptype_row *rows = profile_types(p, f, &n);
	if (!p->obj_event)
		return;
	uint64_t tb = 0, tl = 0;
	for (uint32_t i = 0; i < n; i++) {
		tb += rows[i].alloc_bytes;
		tl += rows[i].live_bytes;
	}
	printf("\nAllocations by type (estimated from samples; live = not freed at the end)\n");
	printf("%6s %11s %13s %12s %11s  %s\n", "bytes%", "alloc-bytes", "alloc-objects", "live-bytes", "live-objects",
	       "type");
	if (!n)
		printf("  (no allocation was sampled)\n");
	for (uint32_t i = 0; i < n && (!limit || i < (uint32_t)limit); i++) {
		const struct ptype_row *r = &rows[i];
		char ab[32], lb[32], name[200];
		human(ab, sizeof(ab), r->alloc_bytes);
		human(lb, sizeof(lb), r->live_bytes);
		/* Names come from the program: no control characters. */
		snprintf(name, sizeof(name), "%s", p->types[r->type]);
		for (char *c = name; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		printf("%6.1f %11s %13llu %12s %11llu  %s\n", tb ? 100.0 * (double)r->alloc_bytes / (double)tb : 0.0, ab,
		       (unsigned long long)r->alloc_objects, lb, (unsigned long long)r->live_objects, name);
	}
	if (n > (uint32_t)limit && limit)
		printf("  ... %u more types (--limit 0 shows all)\n", n - (uint32_t)limit);
	char a1[32], a2[32];
	human(a1, sizeof(a1), tb);
	human(a2, sizeof(a2), tl);
	printf("total: %s allocated, %s live\n", a1, a2);
	free(rows);
}

void report_types_json(const struct profile *p, const struct agg_filter *f, struct json *j)
{
	uint32_t n;
	struct ptype_row *rows = profile_types(p, f, &n);
	json_key(j, "types");
	json_array_begin(j);
	for (uint32_t i = 0; i < n; i++) {
		const struct ptype_row *r = &rows[i];
		json_object_begin(j);
		json_key(j, "type");
		json_string(j, p->types[r->type]);
		json_key(j, "alloc-objects");
		json_uint(j, r->alloc_objects);
		json_key(j, "alloc-bytes");
		json_uint(j, r->alloc_bytes);
		json_key(j, "live-objects");
		json_uint(j, r->live_objects);
		json_key(j, "live-bytes");
		json_uint(j, r->live_bytes);
		json_object_end(j);
	}
	json_array_end(j);
	free(rows);
}
