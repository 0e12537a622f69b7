/*
 * profile-internal.h — loader state behind struct profile (p->in), shared
 * by the files that implement profile.h: profile.c (ingesting records),
 * profile-procs.c (the session, its processes and threads), stacks.c
 * (turning a stack record into a call-tree node), native.c (native
 * frames) and aggregate.c. Nothing else includes it.
 */
#ifndef STRATA_PROFILE_INTERNAL_H
#define STRATA_PROFILE_INTERNAL_H

#include "intern.h"
#include "common/format.h"
#include "common/perfmap.h"
#include "linetable.h"
#include "profile.h"

/* One REC_CODE of one stream: its function and decoded line table. */
struct pcode {
	uint32_t func;
	struct linetable lt;
};

/* Per-stream state: code and stack indices are per stream, and sample
 * times are a running sum of deltas from the process start. */
struct pstream {
	uint64_t id;
	uint32_t proc;        /* index into p->procs, PNONE until known */
	uint64_t clock;       /* CLOCK_MONOTONIC time of the last sample */
	uint64_t drops;       /* sum of this stream's REC_DROPPED counts */
	struct sym_space *space;    /* its native mappings (native.c), NULL until a REC_MODULE */
	struct u64map native_map;   /* address (bit 63: a return address) → natives[] */
	struct perfmap_table pmap;  /* its REC_PERFMAP entries (native.c) */
	uint64_t objects_rate;      /* --objects: mean bytes between allocation samples */
	double objects_acc;         /* allocations estimated so far (allocs.c) */
	struct jit_space *jit;      /* its JIT images (native.c), NULL until a REC_JIT_IMAGE */
};

/* One native address of one stream, symbolized (native.c). */
struct pnative {
	uint32_t frame;       /* the innermost of its frames (those inlined there follow
	                       * inlined_into out to the function); PNONE when all are
	                       * hidden in this model (CPython's call machinery) */
	uint16_t depth;       /* how many frames that chain has (0 with PNONE) */
	uint32_t callsite;    /* an eval activation with keep_interpreter: the innermost
	                       * function inlined into it where it called out (a chain
	                       * not linked to the eval frame, shown under the Python
	                       * frames it runs); else PNONE */
	uint16_t callsite_depth;
	uint8_t eval;         /* an activation of CPython's eval loop */
	uint8_t interpreter;  /* CPython's own code */
	uint8_t gc;           /* the interpreter's, and a garbage collector entry
	                       * (interp_is_gc), itself or inlined there */
};

/* What a native stack record said about its unwinding, per stack
 * (native_stacks), so that samples can be counted in p->native. */
enum { NSTACK_NATIVE = 1, NSTACK_FAILED = 2, NSTACK_TRUNCATED = 4, NSTACK_MISMATCH = 8 };

struct profile_internal {
	struct load_opts opts;
	struct strpool strs;
	struct idmap func_map;      /* (kind, name, file, line, module) → func */
	struct idmap frame_map;     /* (func, line, addr) → frame */
	struct u64map node_map;     /* parent << 32 | frame → node */
	struct u64map fl_map;       /* func << 32 | line → line-row key */
	struct u64map stream_map;   /* stream id → index into streams */
	struct u64map code_map;     /* stream index << 32 | code index → codes[] */
	struct u64map stack_map;    /* stream index << 32 | stack index → node */
	struct u64map thread_map;   /* process << 32 | tid → thread */
	struct u64map pyframe_map;  /* code slot << 32 | lasti → frame: a line table
	                             * is searched once per instruction seen */

	struct pcode *codes;
	uint32_t ncodes, cap_codes;
	struct pstream *streams;
	uint32_t nstreams, cap_streams;
	uint64_t last_stream_id;    /* one-entry cache in front of stream_map */
	uint32_t last_stream;

	/* Per node, parallel to p->nodes: its function and line-row key, and
	 * whether it is the outermost occurrence of each on its path. Total
	 * cost is then the subtree cost of the outermost occurrences, which
	 * counts a recursive function once per sample (aggregate.c). */
	uint32_t *node_func, *node_fl;
	uint8_t *node_first;        /* NODE_FIRST_* */
	uint32_t cap_node_func, cap_node_fl, cap_node_first;

	/* Stamps marking what the stack being converted has seen so far. */
	uint32_t *func_stamp, *fl_stamp;
	uint32_t cap_func_stamp, cap_fl_stamp, stamp;

	/* Line rows: each frame's (func, line) key, and each key's parts. */
	uint32_t *frame_fl;
	uint32_t *fl_func, *fl_line;
	uint32_t nfl, cap_fl_func, cap_fl_line, cap_frame_fl;

	/* Array capacities (each array grows on its own). */
	uint32_t cap_funcs, cap_frames, cap_nodes, cap_threads, cap_procs;
	uint32_t cap_samples, cap_values;

	int events_fixed;           /* samples exist: nevents can no longer change */
	int have_session, have_session_end;
	uint64_t first_time, last_time; /* over samples */
	int have_time;

	/* Problems found while interpreting records (the reader's own
	 * diagnostics are added to the warnings separately). */
	uint64_t bad_bodies;        /* records whose body did not decode */
	uint64_t unknown_stacks;    /* samples naming a stack never seen */
	uint64_t unknown_codes;     /* frames naming a code object never seen */
	uint64_t orphan_records;    /* records of a stream whose REC_PROCESS is missing */
	int oom;

	uint32_t *scratch;          /* frames of the stack being converted */
	uint32_t cap_scratch;

	/* --native (native.c, stacks.c) */
	struct symbolizer *sym;     /* one for the whole profile, NULL until needed */
	struct pnative *natives;
	uint32_t nnatives, cap_natives;
	struct u64map native_stacks; /* stream index << 32 | stack index → NSTACK_* */
	void *merge_scratch;        /* merge inputs and output of the stack being converted */
	size_t cap_merge_scratch;

	/* --objects (objects.c) */
	struct u64map type_map;     /* stream index << 32 | REC_OBJ_TYPE index → types[] */
	struct u64map alloc_map;    /* stream index << 40 | allocation id → sample */
	struct u64map early_free;   /* the same key, freed before its REC_ALLOC was read */
	uint32_t cap_types;
	uint32_t domain_type[ALLOC_NDOMAINS]; /* types[] of each allocator's blocks, PNONE until used */

	/* asyncio (tasks.c) */
	struct u64map task_map;     /* stream index << 32 | REC_TASK index → tasks[] */
	struct u64map stack_task;   /* stream index << 32 | stack index → tasks[] (innermost) */
	uint32_t cap_tasks;
};

enum { NODE_FIRST_FUNC = 1, NODE_FIRST_LINE = 2 };

/* Interning, shared with stacks.c. All return PNONE on OOM (in->oom set). */
uint32_t profile_intern_func(struct profile *p, int kind, const char *name, const char *file,
			     uint32_t line, const char *module);
uint32_t profile_intern_frame(struct profile *p, uint32_t func, uint32_t line, uint64_t addr);
/* A frame of a function inlined into frame `into` (PNONE: none). */
uint32_t profile_intern_inlined_frame(struct profile *p, uint32_t func, uint32_t line, uint64_t addr, uint32_t into);
/* `first` (NODE_FIRST_*) is recorded if the node is new; it depends only on
 * the node's path, so it is the same for every stack that reaches it. */
uint32_t profile_intern_node(struct profile *p, uint32_t parent, uint32_t frame, uint8_t first);
/* A synthetic (PK_OTHER) function's frame, e.g. "[no Python frame]". */
uint32_t profile_marker_frame(struct profile *p, const char *name);

/* profile.c: appends a sample of stream `st` (process pr) at the node of
 * its stack record `stack`, its values zero; its index, or UINT64_MAX. */
uint64_t profile_append_sample(struct profile *p, uint32_t st, uint32_t pr, uint32_t tid, uint32_t stack,
			       uint64_t time, uint32_t flags);

/* profile.c: grows *arr (elements of `size` bytes) to hold at least n,
 * doubling; 0, or -1 on OOM. */
int grow(void *arr, uint32_t *cap, uint64_t n, size_t size);

/* profile-procs.c: the records that say what ran, each handed over by
 * on_record; and what the rest of the loader asks of them: the process of
 * stream `st` (a placeholder when its REC_PROCESS was lost), thread `tid`
 * of process `proc` (made on first sight), both PNONE on OOM; and the
 * events' names, "samples" then `names` (0, or -1 on OOM). */
uint32_t stream_proc(struct profile *p, uint32_t st, const struct reader_stream *rs);
uint32_t thread_get(struct profile *p, uint32_t proc, uint32_t tid);
int set_events(struct profile *p, uint32_t n, char **names);
void on_session(struct profile *p, struct rbuf *body);
void on_session_end(struct profile *p, struct rbuf *body);
void on_process(struct profile *p, uint32_t st, struct rbuf *body);
void on_process_end(struct profile *p, uint32_t st, const struct reader_stream *rs, struct rbuf *body);
void on_thread(struct profile *p, uint32_t st, const struct reader_stream *rs, uint64_t type, struct rbuf *body);
void on_dropped(struct profile *p, uint32_t st, const struct reader_stream *rs, struct rbuf *body);
void on_event_desc(struct profile *p, struct rbuf *body);

/* objects.c: a process that sampled allocations; the records of
 * allocations; freeing what objects.c owns. */
void objects_on_process(struct profile *p, uint32_t st, uint64_t rate);
void objects_on_record(struct profile *p, uint32_t st, uint32_t pr, uint64_t type, struct rbuf *body);
void objects_free(struct profile *p);

/* tasks.c: REC_TASK of stream `st`; the root-first frames of a stack with
 * task boundaries (no native frames) into fr (room for npy + 3 * ntasks
 * + 2), their count; the tasks[] index of REC_TASK `task` of stream `st`
 * (PNONE if unknown); freeing. */
void tasks_on_record(struct profile *p, uint32_t st, struct rbuf *body);
uint32_t tasks_path(struct profile *p, uint32_t st, const struct rec_stack *r, uint32_t *fr,
		    uint32_t (*pyf)(struct profile *, uint32_t, const struct rec_pyframe *));
uint32_t tasks_lookup(struct profile *p, uint32_t st, uint32_t task);
/* With native frames: the awaiters' part of tasks_path, down to and with
 * the running task's marker. */
uint32_t tasks_awaiters_path(struct profile *p, uint32_t st, const struct rec_stack *r, uint32_t *fr,
			     uint32_t (*pyf)(struct profile *, uint32_t, const struct rec_pyframe *));
/* The frames a task boundary adds (its marker, and one for other awaiters). */
uint32_t tasks_marker(struct profile *p, uint32_t st, const struct rec_task_frame *b, uint32_t *fr);
void tasks_free(struct profile *p);

/* stacks.c: the call-tree node for one stack record of stream `st`. */
struct rec_stack;
uint32_t stack_to_node(struct profile *p, uint32_t st, const struct rec_stack *r);

/* native.c: a REC_MODULE of stream `st`; the symbolized native address
 * `addr` of stream `st` (`call`: a return address), NULL on OOM; and
 * freeing what native.c owns (called by profile_free). */
struct rbuf;
void native_on_module(struct profile *p, uint32_t st, struct rbuf *body);
void native_on_perfmap(struct profile *p, uint32_t st, struct rbuf *body);
const struct pnative *native_lookup(struct profile *p, uint32_t st, uint64_t addr, int call);
void native_free(struct profile *p);
/* native.c: REC_JIT_IMAGE / REC_JIT_UNLOAD of stream `st`. */
void native_on_jit(struct profile *p, uint32_t st, uint64_t type, struct rbuf *body);
/* The frame of an address in JIT code recorded without --native
 * (STACK_JIT_LEAF), PNONE on OOM. */
uint32_t native_jit_frame(struct profile *p, uint32_t st, uint64_t addr, int call);

#endif
