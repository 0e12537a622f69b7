/*
 * ratios.h — derived metrics shown next to event counts when both of their
 * parts were recorded: instructions per cycle, cache-miss rate, branch-miss
 * rate. `report` and `annotate` show them per function and per line; a
 * ratio of sums (not an average of per-sample ratios), so a line's IPC is
 * its instructions over its cycles.
 */
#ifndef STRATA_RATIOS_H
#define STRATA_RATIOS_H

#include <stdint.h>

#include "profile.h"

struct ratio {
	const char *label;   /* column heading: "IPC", "cache-miss%", "branch-miss%" */
	const char *key;     /* JSON key: "IPC", "cache-miss-rate", "branch-miss-rate" */
	uint32_t num, den;   /* event indices into the profile's events */
	int percent;         /* shown as a percentage (the JSON value is a fraction) */
};

#define RATIOS_MAX 3

/* The ratios whose two events the profile has. Returns how many (<= RATIOS_MAX). */
uint32_t profile_ratios(const struct profile *p, struct ratio out[RATIOS_MAX]);

/* The ratio over costs v (one per event); returns -1 when the denominator
 * is 0 (nothing to divide: shown as blank / null). */
double ratio_value(const struct ratio *r, const uint64_t *v);

#endif
