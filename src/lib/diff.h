/*
 * diff.h — comparing two profiles: which functions, lines and files of
 * one are which of the other (diff-match.c), whether the two measure the
 * same thing (diff.c), and the cost of each on both sides (diff.c). What
 * `strata diff`, `convert --diff` and `annotate --diff` share; each only
 * lays the result out.
 *
 * Matching. Two recordings of one program name their code differently:
 * another checkout directory, another machine's site-packages, another
 * build of a library (other build ids, other addresses). Keys are what
 * stays:
 *   Python   the file, matched across the two profiles (below), and the
 *            qualified name; a line key adds the line. The first line is
 *            left out, so a function that moved in its file still matches.
 *   native   the object's file name (not its directory or build id) and
 *            the symbol
 *   JIT      the function's name (Numba: its Python name and signature)
 *   markers  their text ("[gc]", "[no Python frame]")
 * Files are matched, after --strip-prefix, by equal path, then by the
 * longest common run of trailing path components when one file of the
 * other profile has it alone, then by the directory rewrite those unique
 * matches agree on most (/home/a/proj → /tmp/b/proj), which settles the
 * ambiguous ones (two __init__.py). A file of one profile that matches
 * nothing is new (or vanished).
 *
 * Keys are small integers shared by both profiles, so costs of the two
 * sides line up by index.
 */
#ifndef STRATA_DIFF_H
#define STRATA_DIFF_H

#include <stdint.h>

#include "profile.h"

enum { DIFF_BASE = 0, DIFF_NEW = 1 };

/* ---- matching (diff-match.c) ---------------------------------------------- */

struct diff_match_opts {
	const char *const *strip;   /* --strip-prefix: removed from the start of paths of either profile */
	uint32_t nstrip;
};

struct diff_match;

/* NULL when out of memory. The profiles must outlive the result. */
struct diff_match *diff_match_build(const struct profile *base, const struct profile *new_,
				    const struct diff_match_opts *o);
void diff_match_free(struct diff_match *m);

uint32_t diff_nkeys(const struct diff_match *m);
/* The key of a function, of a frame (its function and line), and of a
 * function's file (a native function without a source file: its object),
 * PNONE for marker frames' files. */
uint32_t diff_func_key(const struct diff_match *m, int side, uint32_t func);
uint32_t diff_line_key(const struct diff_match *m, int side, uint32_t frame);
uint32_t diff_file_key(const struct diff_match *m, int side, uint32_t func);
/* The key of a source path of one side (as the profile spells it, e.g. a
 * linecost file), PNONE when no function of that side is in it. */
uint32_t diff_path_key(const struct diff_match *m, int side, const char *path);
/* The first frame / function of NEW with the same key as BASE's, or PNONE. */
uint32_t diff_frame_in_new(const struct diff_match *m, uint32_t base_frame);
uint32_t diff_func_in_new(const struct diff_match *m, uint32_t base_func);

/* How the files of the two sides were paired, for the summary. */
struct diff_file_stats {
	uint32_t same;        /* the same path (after --strip-prefix) */
	uint32_t moved;       /* paired across directories */
	uint32_t base_only, new_only;
};
void diff_file_stats(const struct diff_match *m, struct diff_file_stats *st);

/* The path a file's key stands for on `side` (the profile's own string),
 * or NULL if that side has no such file. For tests and messages. */
const char *diff_key_path(const struct diff_match *m, int side, uint32_t key);

/* ---- compatibility (diff.c) ----------------------------------------------- */

#define DIFF_NOTES_MAX 8

/* What the two profiles measure, and what was done so they compare. */
struct diff_check {
	uint32_t event[2];       /* the compared event's index in each profile */
	double scale[2];         /* one unit of the event in `unit` (samples: the
	                          * sampling period); 0 when unknown */
	const char *unit;        /* "ns", "bytes", "objects", an event name, "count" */
	char notes[DIFF_NOTES_MAX][240]; /* said to the user: what differs but compares */
	uint32_t nnotes;
};

/* Whether base and new can be compared on event `event` (NULL: samples):
 * the same mode (cpu, wall), the same sampling event, the event recorded
 * by both in the same unit. Returns 0 and fills *c, or -1 with one line in
 * why saying what differs (names[] name the two profiles in messages).
 * `absolute` asks for the unit: both periods must then be known. */
int diff_check(const struct profile *const p[2], const char *const names[2], const char *event, int absolute,
	       struct diff_check *c, char *why, size_t whylen);

/* ---- costs per key (diff.c) ----------------------------------------------- */

enum diff_by { DIFF_BY_FUNCTION = 0, DIFF_BY_LINE = 1, DIFF_BY_FILE = 2 };

/* Which samples of one profile count. */
struct diff_filter {
	uint32_t pid, tid;       /* 0 = every one */
	const char *thread;      /* thread name, NULL = every one */
	const char *task;        /* asyncio task: only samples under a "[task NAME]"
	                          * frame (issue 23's task frames); NULL = all */
	int exclude_idle;
	uint32_t event;
};

/* One profile's cost per key: self (the sample's innermost frame has the
 * key) and total (the key anywhere on the stack, once per sample), of the
 * filtered samples' `event`. */
struct diff_costs {
	uint64_t *self, *total;  /* diff_nkeys() each */
	uint32_t *rep;           /* per key: a function (or, by line, a frame) of this side, PNONE */
	uint64_t all;            /* the event over the filtered samples */
	uint64_t nsamples;       /* filtered sample records */
};

/* 0, or -1 when out of memory. */
int diff_costs_build(const struct profile *p, const struct diff_match *m, int side, enum diff_by by,
		     const struct diff_filter *f, struct diff_costs *out);
void diff_costs_free(struct diff_costs *c);
/* Whether the filter's pid, tid, thread and task exist in p: 0, or -1
 * with what is missing in why. */
int diff_filter_check(const struct profile *p, const struct diff_filter *f, char *why, size_t whylen);

/* ---- rows: what changed -------------------------------------------------- */

enum diff_status { DIFF_CHANGED = 0, DIFF_NEW_ONLY = 1, DIFF_VANISHED = 2 };

struct diff_row {
	uint32_t key;
	uint32_t rep[2];         /* function (by line: frame) of each side, PNONE if absent */
	uint64_t self[2], total[2];
	double value[2];         /* the compared measure: share of the side's total
	                          * (0..1), or with absolute self (total) × scale */
	double delta;            /* value[1] - value[0] */
	double points;           /* the change in percentage points: of shares, or
	                          * with absolute of BASE's total */
	double ratio;            /* value[1] / value[0]; 0 when vanished, INFINITY when new */
	int status;              /* enum diff_status */
};

struct diff_query {
	enum diff_by by;
	int by_total;            /* compare total instead of self */
	int absolute;            /* values in the unit (diff_check's scale) instead of shares */
	struct diff_filter f[2];
};

struct diff_result {
	struct diff_row *rows;   /* every key with a cost on either side, by delta, largest increase first */
	uint32_t nrows;
	uint64_t all[2];         /* each side's total of the event */
	uint64_t nsamples[2];
	double all_value[2];     /* the totals as values: 1, or with absolute all × scale */
};

/* NULL when out of memory. */
struct diff_result *diff_compare(const struct profile *const p[2], const struct diff_match *m,
				 const struct diff_check *c, const struct diff_query *q);
void diff_result_free(struct diff_result *r);

/* ---- trees: NEW's call tree with BASE's cost on it (flame graphs) -------- */

/* BASE's cost of `event` on NEW's call-tree nodes: a BASE node lands on
 * the NEW node reached by the same path of line keys (or, by_func, of
 * function keys); base_self[n] is the self cost of BASE that landed on NEW
 * node n, and *unmatched BASE's self cost on paths NEW does not have.
 * Idle samples are left out when exclude_idle. base_self has
 * new->nnodes entries. 0, or -1 when out of memory. */
int diff_tree_map(const struct profile *base, const struct profile *new_, const struct diff_match *m,
		  uint32_t base_event, int exclude_idle, int by_func, uint64_t *base_self, uint64_t *unmatched);

#endif
