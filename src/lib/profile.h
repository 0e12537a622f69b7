/*
 * profile.h — the one in-memory profile model.
 *
 * Every report, the live view and every exporter read this; none of them
 * re-reads the file. It is built by ingesting the records of a .strata file
 * (all at once, or incrementally while the file grows, for `strata top`).
 *
 *   funcs    one per function: a Python code object's qualified name and
 *            file, a native symbol, a JIT function (deduplicated by kind,
 *            name, file, first line and module)
 *   frames   a function at a line (and, for native/JIT code, an address):
 *            the unit stacks are made of
 *   nodes    the call tree: node 0 is the root; every other node has a
 *            parent and a frame. A stack is the path from the root to a node.
 *   samples  one per sample record: its leaf node, thread, time, flags, and
 *            one value per event in values[i * nevents + e]
 *
 * Event 0 is always "samples" (the sample's weight, in sampling periods);
 * events 1.. are the counters recorded with -e, in order. Costs are always
 * per event, so every consumer handles extra event columns the same way.
 *
 * Synthetic frames (kind PK_OTHER) stand for what is not a real frame:
 * "[truncated: N frames]" at the root of a stack cut by the depth cap,
 * "[interpreter startup]" / "[interpreter shutdown]" for a sample taken
 * before the interpreter ran any Python code or after it began finalizing,
 * "[no Python frame]" for a sample taken while the thread ran no Python
 * code (interpreter start-up, a non-Python thread), "[unreadable frames]"
 * when the agent could not read the stack (at the root of a partial one),
 * "[gc]" (PROFILE_GC) for the time CPython's cyclic garbage collector ran:
 * directly under the Python frame whose allocation set it off (the
 * collector's own frames, with --native, under it).
 * A damaged file adds two more: "[unknown stack]" for a sample whose
 * stack record was lost, "[unknown code]" for a frame whose code record
 * was lost.
 *
 * Native frames (recorded with --native; kind PK_NATIVE) are merged with
 * the Python frames in the order they ran: each activation of CPython's
 * eval loop is replaced by the Python frames it was running, and CPython's
 * other frames are left out unless load_opts.keep_interpreter. A native
 * function has name = its symbol (C++ demangled) or "object+0xSTART" when
 * the object has none, file and line (first line) from DWARF or ""/0, and
 * module = the object's path; a native frame has line = the line executing
 * (DWARF, 0 if unknown) and addr = the address in the object's ELF file
 * (the interrupted instruction at the leaf, a return address above it).
 * "[native stack incomplete]" (PK_OTHER) separates Python frames the
 * native walk could not reach from the native frames it found.
 *
 * Functions inlined into a native function (DWARF inlined subroutines)
 * are frames of their own, right below the frame they are inlined into,
 * outermost first, each at its own line and at the same address; such a
 * frame's inlined_into names the frame around it. The outer function's
 * line is the line that the inlined code came from (its call site), so
 * every line of a frame is a line of that frame's function. Exporters
 * whose format knows inlining (pprof: several lines per location) group a
 * frame with those inlined into it; for the others they are calls.
 */
#ifndef STRATA_PROFILE_H
#define STRATA_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "reader.h"

/* The synthetic frame of the garbage collector's time. */
#define PROFILE_GC "[gc]"

enum pkind { PK_PYTHON = 0, PK_NATIVE = 1, PK_JIT = 2, PK_OTHER = 3 };
/* "python", "native", "jit", "other" */
const char *pkind_name(int kind);

#define PNONE UINT32_MAX

struct pfunc {
	const char *name;    /* qualified name (Class.method, outer.<locals>.inner) */
	const char *file;    /* source file, "" if unknown */
	uint32_t line;       /* first line, 0 if unknown */
	uint8_t kind;        /* enum pkind */
	const char *module;  /* native/JIT object path, NULL for Python */
};

struct pframe {
	uint32_t func;
	uint32_t line;       /* line executing in this frame, 0 if unknown */
	uint64_t addr;       /* instruction address for native/JIT frames, else 0 */
	uint32_t inlined_into; /* a function inlined into another (native code with
	                        * DWARF): the frame it is inlined into, which has the
	                        * same address and is its parent in every stack; PNONE
	                        * for a frame of its own (every Python frame) */
};

struct pnode {
	uint32_t parent;     /* PNONE for the root */
	uint32_t frame;      /* PNONE for the root */
	uint32_t depth;      /* root = 0 */
};

enum psample_flags {
	PS_IDLE = 1 << 0,
	PS_ALLOC = 1 << 1,   /* an allocation sample (--objects) */
	PS_WAITING = 1 << 2, /* a suspended asyncio task's sample (wall mode): where it waits */
};

struct psample {
	uint32_t node;       /* leaf */
	uint32_t thread;     /* index into threads */
	uint64_t time_ns;    /* CLOCK_MONOTONIC */
	uint32_t flags;      /* PS_* */
	uint32_t type;       /* PS_ALLOC: index into types; else PNONE */
	uint32_t task;       /* the innermost asyncio task of its stack: index into tasks; else PNONE */
};

struct pthread_info {
	uint32_t pid, tid;
	uint32_t process;    /* index into procs */
	char *name;
	uint64_t start_ns, end_ns; /* end 0 = never saw it end */
	uint64_t samples;    /* sum of weights */
	uint64_t dropped;
	int main;
};

struct pprocess {
	uint32_t pid, ppid;
	char *command;       /* argv joined with spaces */
	char *executable;
	char *python_version;
	uint32_t flags;      /* PROC_* */
	uint64_t start_ns, end_ns;
	uint64_t samples, dropped;
	int ended;           /* wrote its last chunk */
	int end_reason;      /* enum process_end_reason, when ended */
};

/* What the recording says about one event (REC_EVENT_DESC). Event 0,
 * "samples", has none; an event whose description was lost has known = 0. */
struct pevent_info {
	int known;
	uint32_t type;       /* perf_event_attr.type and config */
	uint64_t config;
	uint64_t period;     /* sampling period in occurrences (ns for clocks); 0 = counted */
	uint32_t flags;      /* EVD_*: sampling, user space only, clock */
};

struct profile {
	/* session */
	char *command;          /* the command strata ran */
	char *strata_version;
	char *hostname;
	char *python_version;   /* of the first profiled process */
	int mode;               /* MODE_CPU / MODE_WALL */
	unsigned rate_hz;
	uint64_t period_ns;
	uint64_t start_realtime_ns;
	uint64_t start_ns, end_ns;  /* CLOCK_MONOTONIC: session (or first/last sample) */
	int has_exit_status;
	int64_t exit_status;        /* >= 0 exit code, < 0 killed by signal */
	uint64_t dropped;
	int truncated;              /* file cut short or streams unfinished */

	/* events: event 0 is "samples" */
	uint32_t nevents;
	char **event_names;
	uint64_t *totals;           /* nevents: sum over all samples */
	struct pevent_info *event_info; /* nevents */

	struct pfunc *funcs;
	uint32_t nfuncs;
	struct pframe *frames;
	uint32_t nframes;
	struct pnode *nodes;
	uint32_t nnodes;
	struct psample *samples;
	uint64_t nsamples;
	uint64_t *values;           /* nsamples * nevents */
	struct pthread_info *threads;
	uint32_t nthreads;
	struct pprocess *procs;
	uint32_t nprocs;

	/* --objects (objects.c): obj_event is the index of "alloc-objects";
	 * "alloc-bytes", "live-objects", "live-bytes" follow it; 0 = no
	 * allocations recorded. An allocation sample (PS_ALLOC) carries the
	 * estimated objects and bytes it stands for in those events, 0 in
	 * the others; its live values are 0 once it was freed. types[]
	 * names what was allocated: object types ("dict", "Outer.Inner")
	 * and, for blocks that hold no object, the allocator
	 * ("[PyMem_Malloc]"). */
	uint32_t obj_event;
	char **types;
	uint32_t ntypes;

	/* asyncio (docs/async.md): the tasks named in stacks, by name (tasks
	 * of one name are one row); a stack's innermost one is its sample's
	 * task. */
	char **tasks;
	uint32_t ntasks;

	/* --native: samples whose stack has native frames (sums of weights),
	 * and those among them whose unwinding stopped early (failed: code
	 * without usable unwind information; truncated: the depth cap) or
	 * whose Python and native frames did not pair up (mismatch). */
	struct {
		uint64_t samples, failed, truncated, mismatch;
	} native;

	/* --native: the native objects the recording names (REC_MODULE), one
	 * per (path, build id): what OTLP's mappings carry. build_id is the
	 * GNU build id in hex, "" when the object has none. */
	struct pmodule {
		char *path;
		char *build_id;
	} *modules;
	uint32_t nmodules;

	/* warnings collected while loading (one line each, no prefix) */
	char **warnings;
	uint32_t nwarnings;

	struct profile_internal *in; /* loader state (interning, per-stream tables) */
};

struct load_opts {
	int keep_interpreter;   /* --keep-interpreter: keep CPython's own frames (with --native),
	                         * and the frames that run asyncio's event loop under a task */
	int no_inline;          /* --no-inline: functions inlined into a native frame are not
	                         * frames of their own; their time is the outer function's */
};

/* Loads a whole file. On failure returns NULL with a one-line reason
 * (without the path) in err. Damage that still leaves a readable prefix is
 * not a failure: it becomes a warning and p->truncated. */
struct profile *profile_load(const char *path, const struct load_opts *o, char *err, size_t errlen);

/* Incremental use (the live view): create, then ingest whatever the reader
 * has appended since the last call. Returns 0 or -1 (err filled). */
struct profile *profile_new(const struct load_opts *o);
int profile_ingest(struct profile *p, struct reader *r, int final, char *err, size_t errlen);
void profile_free(struct profile *p);

/* --objects: keeps only the allocation samples of type `name` (every
 * report and export then shows that type alone). Returns 0, or -1 if no
 * allocation of that type was recorded (err names the types there are). */
int profile_filter_type(struct profile *p, const char *name, char *err, size_t errlen);

struct agg_filter;
/* Keeps only the samples whose innermost asyncio task is named `name`
 * (every report and export then shows that task alone). 0, or -1 if no
 * such task was recorded (err names some that were). */
int profile_filter_task(struct profile *p, const char *name, char *err, size_t errlen);
/* The index in tasks of the task named `name`, or PNONE. */
uint32_t profile_task_find(const struct profile *p, const char *name);

/* One row of the tasks table: a task's samples running (its own code on
 * a thread) and waiting (suspended: wall mode), and where it waited most. */
struct ptask_row {
	uint32_t task;
	uint64_t running, waiting;  /* sums of weights */
	uint32_t top_wait;          /* the frame it waited at most (its innermost), PNONE if none */
	uint64_t top_wait_samples;
};
/* The tasks table over the samples `f` keeps (NULL: all), by running +
 * waiting, descending; *n rows, malloc'ed. */
struct ptask_row *profile_tasks(const struct profile *p, const struct agg_filter *f, uint32_t *n);

/* One row of the types table: an allocated type's totals. */
struct ptype_row {
	uint32_t type;
	uint64_t alloc_objects, alloc_bytes, live_objects, live_bytes;
};
/* The types table over the samples `f` keeps (NULL: all), sorted by
 * alloc-bytes, descending; *n rows, malloc'ed (NULL with *n = 0 when
 * there are none). */
struct agg_filter;
struct ptype_row *profile_types(const struct profile *p, const struct agg_filter *f, uint32_t *n);

/* The build id (hex) recorded for the native object at `path`, or NULL. */
const char *profile_build_id(const struct profile *p, const char *path);

/* Frames of the stack ending at `node`, root first. Returns the depth; at
 * most `max` are stored. */
uint32_t profile_stack(const struct profile *p, uint32_t node, uint32_t *frames, uint32_t max);

static inline uint64_t profile_value(const struct profile *p, uint64_t sample, uint32_t event)
{
	return p->values[sample * p->nevents + event];
}

/* ---- aggregation: what report, annotate and top show ------------------- */

struct agg_filter {
	uint32_t pid;           /* 0 = all */
	uint32_t tid;           /* 0 = all */
	uint64_t t0, t1;        /* time window, 0 = unbounded */
	int exclude_idle;
	uint64_t first_sample;  /* only samples with index >= this (live view intervals) */
	uint32_t type;          /* 1 + index into types: only allocations of that type; 0 = all */
	uint32_t task;          /* 1 + index into tasks: only samples of that task; 0 = all */
};

struct agg_row {
	uint32_t func;          /* function rows and line rows */
	uint32_t line;          /* line rows only (0 in function rows) */
	uint64_t *self;         /* nevents */
	uint64_t *total;        /* nevents; a function or line is counted once per sample */
};

struct agg {
	uint32_t nevents;
	uint64_t *totals;       /* nevents, over the filtered samples */
	uint64_t nsamples;      /* filtered sample records */
	struct agg_row *funcs;
	uint32_t nfuncs;
	struct agg_row *lines;
	uint32_t nlines;
	uint64_t *thread_samples; /* per thread: sum of weights over the filtered samples */
	uint64_t *thread_idle;    /* per thread: idle part of it */
};

/* Aggregates self and total cost per function and per (function, line).
 * Rows are sorted by self cost of `sort_event`, descending (then total). */
struct agg *profile_aggregate(const struct profile *p, const struct agg_filter *f, uint32_t sort_event);
void agg_free(struct agg *a);
/* Re-sorts rows by `by_total ? total : self` of event e. */
void agg_sort(struct agg *a, uint32_t e, int by_total);

#endif
