/*
 * ratios.c — see ratios.h.
 */
#include "ratios.h"

#include <string.h>

static const struct {
	const char *label, *key, *num, *den;
	int percent;
} defs[RATIOS_MAX] = {
	{ "IPC", "IPC", "instructions", "cycles", 0 },
	{ "cache-miss%", "cache-miss-rate", "cache-misses", "cache-references", 1 },
	{ "branch-miss%", "branch-miss-rate", "branch-misses", "branch-instructions", 1 },
};

static uint32_t find_event(const struct profile *p, const char *name)
{
	for (uint32_t e = 1; e < p->nevents; e++)
		if (!strcmp(p->event_names[e], name))
			return e;
	return 0;
}

uint32_t profile_ratios(const struct profile *p, struct ratio out[RATIOS_MAX])
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < RATIOS_MAX; i++) {
		uint32_t num = find_event(p, defs[i].num), den = find_event(p, defs[i].den);
		if (!num || !den)
			continue;
		out[n++] = (struct ratio){ defs[i].label, defs[i].key, num, den, defs[i].percent };
	}
	return n;
}

double ratio_value(const struct ratio *r, const uint64_t *v)
{
	if (!v[r->den])
		return -1;
	return (double)v[r->num] / (double)v[r->den];
}
