/*
 * pyapi.h — the contract between the version-independent agent core
 * (libstrata-agent.so) and the per-Python-version module
 * (strata-py-X.Y.Z.so), which is compiled against that version's own
 * internal headers (Py_BUILD_CORE) so that no struct offset is copied by
 * hand. The core picks the module matching the running interpreter at load
 * time and calls it through this table.
 *
 * Context rules, per entry:
 *  - "handler": runs inside the sampling signal handler (or the wall-mode
 *    sampler thread) under the core's fault guard: plain loads only, no
 *    calls into Python, no locks, no allocation. Any pointer may be stale;
 *    a fault is caught by the guard, a garbage value must be bounded by the
 *    callee (depth caps, type checks).
 *  - "writer": runs in the agent's writer thread without the GIL; may
 *    allocate; reads target memory only through core->safe_read().
 *  - "gil": the calling thread holds the GIL; may use the C API.
 */
#ifndef STRATA_PYAPI_H
#define STRATA_PYAPI_H

#include <stddef.h>
#include <stdint.h>

#define STRATA_PYAPI_VERSION 11

struct strata_pysyms;

/* One Python frame as the handler captures it. The writer turns `code`
 * into a REC_CODE index; (code, first) identifies a code object even if its
 * address is later reused by another one. */
struct strata_pyframe {
	uint64_t code;   /* PyCodeObject* */
	int32_t lasti;   /* instruction offset in 2-byte code units, -1 = none yet */
	uint16_t first;  /* co_firstlineno (low 16 bits): identity check */
	uint16_t flags;  /* PYF_* from format.h */
};

/* What the writer learns about a code object. Strings and the line table
 * are heap allocated by the module and freed by the core with free(). */
struct strata_codeinfo {
	uint32_t firstlineno;
	uint32_t flags;          /* co_flags */
	char *filename, *name, *qualname;
	uint8_t *linetable;
	size_t linetable_len;
};

/* Where asyncio keeps its tasks in the target (pyasync*.c, docs/async.md):
 * found by the reader (strata_pyreader.asyncio_find) once asyncio is
 * imported, and handed to the in-process module for the handler. */
struct strata_asyncref {
	uint64_t current_tasks;  /* dict: event loop -> the task it is running (3.8-3.13; 3.14+: pure-Python mode) */
	uint64_t task_type;      /* _asyncio.Task (C tasks), 0 if none */
	uint64_t py_task_type;   /* asyncio.tasks._PyTask, the pure-Python class, 0 if not found */
	uint64_t future_type;    /* _asyncio.Future, 0 if none */
	uint64_t py_future_type; /* asyncio.futures._PyFuture */
	uint64_t all_tasks;      /* WeakSet of the tasks (_all_tasks; 3.12+ _scheduled_tasks) */
	uint64_t eager_tasks;    /* 3.12+: set of eagerly started tasks */
	/* The interned names of a pure-Python task's attributes (the keys of
	 * its instance dict), compared by address in the handler: 0 if not
	 * known. */
	uint64_t key_coro, key_name, key_loop, key_awaited_by;
	/* 3.14+: the _asyncio module's _Py_AsyncioModuleDebugOffsets (its
	 * address in the target), checked against this module's layout;
	 * tstate_task says the handler reads tstate->asyncio_running_task. */
	uint64_t debug;
	int32_t tstate_task;
	int32_t pad;
};

/* One task as the reader reads it (strata_pyreader.task_read). */
struct strata_taskinfo {
	char name[128];          /* create_task(name=...), else Task-N */
	uint64_t coro;           /* its coroutine */
	uint64_t loop;           /* its event loop */
	uint64_t waiter;         /* the future it is blocked on (_fut_waiter), 0 if none */
	uint64_t awaits;         /* the future (or task) at the bottom of its await chain, 0 if none */
	int32_t awaits_task;     /* 1 if `awaits` is a task */
	int32_t running;         /* its coroutine is running (not suspended, not finished) */
	int32_t done;            /* its coroutine has finished (fr then holds nothing) */
	uint32_t nframes;        /* frames of its coroutine chain */
	uint64_t code;           /* its coroutine's code object (even once it finished) */
	uint16_t first;          /* and that code's co_firstlineno (low 16 bits) */
};

/* What the handler can tell about the task it found running (beside its
 * address), for when the task has ended by the time the helper reads it:
 * the index in the walk (leaf first) of the task's coroutine frame, and
 * its name. */
struct strata_taskhint {
	int32_t at;              /* -1 if not found */
	uint8_t len;             /* bytes of name */
	char name[47];           /* not NUL-terminated */
};

/* Where one call of strata_pyreader.tasks_next goes on from. */
struct strata_taskcursor {
	uint32_t source;         /* which list of tasks */
	uint32_t pad;
	uint64_t pos;            /* where in it: a table index, or the last task's list node */
	uint64_t list;           /* 3.14+: the thread state (or interpreter) whose list is being read */
};

enum strata_phase {
	STRATA_PHASE_RUNNING = 0,
	STRATA_PHASE_UNINITIALIZED = 1, /* before Py_Initialize finished, or after finalization */
	STRATA_PHASE_FINALIZING = 2,    /* Py_FinalizeEx is running */
};

/* Services the core offers the module. */
struct strata_core {
	/* Copies n bytes from address src of this process without faulting
	 * (process_vm_readv). Returns 0 on success, -1 if unreadable. */
	int (*safe_read)(void *dst, uint64_t src, size_t n);
};

struct strata_pyapi {
	int api_version;           /* STRATA_PYAPI_VERSION */
	const char *built_for;     /* PY_VERSION of the headers the module was built from */
	int linetable_fmt;         /* enum linetable_fmt */

	/* handler: is the interpreter far enough along that frames can be read? */
	int (*ready)(void);
	/* handler: where the interpreter is in its life (STRATA_PHASE_*), for
	 * naming samples that have no Python frames. */
	int (*phase)(void);
	/* handler: the calling thread's PyThreadState, or NULL */
	void *(*current_tstate)(void);
	/* handler: walks the frames of `tstate`, leaf first, into out[0..max).
	 * Returns the number stored; *missing gets the number of frames beyond
	 * the cap (counted up to a bound). Unless gc is NULL, *gc gets 1 if
	 * the thread is running the cyclic garbage collector (py/gcstate.h),
	 * and the frame the collection started under carries PYF_GC where
	 * the interpreter says which it is (3.15+). */
	int (*walk)(void *tstate, struct strata_pyframe *out, int max, uint32_t *missing, int *gc);
	/* handler (sampler thread): the PyThreadState whose thread_id is
	 * `pthread_id` in the main interpreter, or NULL. */
	void *(*find_tstate)(unsigned long pthread_id);

	/* writer: reads a code object. Returns 0, or -1 if `addr` is not (or no
	 * longer) a readable code object. */
	int (*read_code)(uint64_t addr, struct strata_codeinfo *out);

	/* any: hooks code-object deallocation. Before a code object for which
	 * wanted(addr) is true is freed, on_death(addr, info) is called with
	 * its contents (info's strings pass to the callee). Runs in whatever
	 * thread frees the object, with the GIL held, so it must be quick. */
	int (*hook_code_death)(int (*wanted)(uint64_t addr),
			       void (*on_death)(uint64_t addr, struct strata_codeinfo *info));

	/* gil: called from the interposed pthread_create; if the caller is
	 * threading.Thread.start(), writes the Thread's name into buf and
	 * returns 0; otherwise -1. Must leave no Python exception set. */
	int (*starting_thread_name)(char *buf, size_t n);

	/* any: where this interpreter's runtime state and core types are, for
	 * a reader in another process (the agent's helper). */
	void (*symbols)(struct strata_pysyms *out);

	/* gil: the calling thread's innermost Python frame as CPython's own
	 * C API reports it (PyEval_GetFrame, f_code, f_lasti, co_firstlineno,
	 * co_name), whatever the layout: what the core compares a walk with
	 * to check a module built for another patch release (pymodule.c).
	 * out->flags is 0. Returns 0, or -1 if no Python frame runs. Leaves
	 * no exception set. */
	int (*api_frame)(struct strata_pyframe *out, char *name, size_t n);

	/* any (--objects): the type of the object a PyObject_Malloc block of
	 * `size` bytes at `block` holds, 0 if none can be told, and in *tag
	 * the type's identity word (py/pyobjects.h). Reads only through rd
	 * (the core passes loads under its fault guard). */
	uint64_t (*obj_type)(int (*rd)(void *ctx, void *dst, uint64_t src, size_t n), void *ctx, uint64_t block,
			     uint64_t size, uint64_t *tag);
	/* any (--objects): the name of the type at `type` and its identity
	 * word, read through rd: 0, or -1 (py/pyobjects.h). The hooks name a
	 * type while it surely lives (one of its objects is being freed),
	 * which the helper, reading later, cannot promise. */
	int (*type_name)(int (*rd)(void *ctx, void *dst, uint64_t src, size_t n), void *ctx, uint64_t type,
			 char *buf, size_t n, uint64_t *tag);
	/* handler: the asyncio task thread `tstate` is running (3.8-3.13: the
	 * one of _current_tasks whose coroutine's frame is on the thread's
	 * chain; 3.14+: tstate->asyncio_running_task), 0 if none; with its
	 * hint (hint->at and the name) filled where the handler can read
	 * them. */
	uint64_t (*running_task)(void *tstate, const struct strata_asyncref *a, struct strata_taskhint *hint);
};

/* Exported by every per-version module. */
typedef const struct strata_pyapi *(*strata_pyapi_init_fn)(const struct strata_core *core);
#define STRATA_PYAPI_INIT_SYM "strata_pyapi_init"

/* ---- reading another process's interpreter --------------------------------
 *
 * The same source is built a second time as strata-pyreader-X.Y.Z.so, with
 * every load from interpreter memory turned into a checked read of another
 * process: the agent's helper (strata-agentd) uses it to name code objects
 * and to read the stacks of blocked threads, and `strata stack` to read a
 * process from outside. It references no symbol of CPython, so it loads in
 * any process; the caller says where the target's runtime and types are. */
struct strata_pysyms {
	uint64_t runtime;       /* &_PyRuntime */
	uint64_t code_type;     /* &PyCode_Type */
	uint64_t frame_type;    /* &PyFrame_Type */
	uint64_t unicode_type;  /* &PyUnicode_Type */
	uint64_t bytes_type;    /* &PyBytes_Type */
};

struct strata_remote {
	/* Copies n bytes at the target's address src into dst; 0, or -1 if
	 * unreadable. Called from any thread of the caller. */
	int (*read)(void *ctx, void *dst, uint64_t src, size_t n);
	void *ctx;
	struct strata_pysyms syms;
};

/* One thread state of the target's main interpreter (strata_pyreader.threads). */
struct strata_pythread {
	uint64_t tstate;     /* PyThreadState* */
	uint64_t thread_id;  /* its pthread_t (tstate->thread_id) */
	uint32_t native_id;  /* its kernel thread id (3.11+), 0 where the interpreter does not keep it */
	int32_t holds_gil;   /* 1 if it holds the GIL now, 0 if not */
};

/* Where a PEP 768 request (what sys.remote_exec writes) goes for one
 * thread state of the target, from the target's own _Py_DebugOffsets
 * (strata_pyreader.remote_exec). */
struct strata_rexec {
	int32_t enabled;            /* the interpreter's config.remote_debug (-X disable-remote-debug,
	                             * PYTHON_DISABLE_REMOTE_DEBUG: 0) */
	uint64_t pending_call;      /* &tstate->remote_debugger_support.debugger_pending_call (int32) */
	uint64_t script_path;       /* &...debugger_script_path (char[script_path_size]) */
	uint64_t script_path_size;
	uint64_t eval_breaker;      /* &tstate->eval_breaker (uintptr_t) */
	uint64_t stop_bit;          /* the eval breaker bit sys.remote_exec sets (_PY_EVAL_PLEASE_STOP_BIT) */
};

struct strata_pyreader {
	int api_version;           /* STRATA_PYAPI_VERSION */
	const char *built_for;
	int linetable_fmt;
	/* The interpreter's phase (STRATA_PHASE_*), or -1 if unreadable. */
	int (*phase)(void);
	/* The PyThreadState whose thread_id is pthread_id in the main
	 * interpreter, 0 if none; -1 cast to uint64_t if unreadable. */
	uint64_t (*find_tstate)(unsigned long pthread_id);
	/* As strata_pyapi.walk, reading the target; -1 if a read failed. */
	int (*walk)(uint64_t tstate, struct strata_pyframe *out, int max, uint32_t *missing, int *gc);
	/* As strata_pyapi.read_code. */
	int (*read_code)(uint64_t addr, struct strata_codeinfo *out);
	/* Before 3.11 (no co_qualname): the qualified name of a code object
	 * from its source (srcqual.h), malloc'ed, or NULL; NULL on 3.11+. */
	char *(*qualname)(const char *filename, uint32_t firstlineno, const char *name);
	/* Whether this reader may read the target (as the module's
	 * strata_py_build_check, on the target's own _Py_DebugOffsets: 3.13+;
	 * 0 before). exe names the target's interpreter in the advice. 0, or
	 * -1 with one line for the user in why. Call it before any other
	 * entry. */
	int (*check)(const char *exe, char *why, size_t n);
	/* The main interpreter's thread states, in its list's order (newest
	 * first), up to max into out. Returns how many, or -1 if unreadable.
	 * For `strata stack`, which reads a paused (or, --nonblocking, a
	 * running) process. */
	int (*threads)(struct strata_pythread *out, int max);
	/* --objects: as strata_pyapi.obj_type, reading the target. */
	uint64_t (*obj_type)(uint64_t block, uint64_t size, uint64_t *tag);
	/* --objects: the name of the type object at `type` ("dict",
	 * "numpy.ndarray", "Outer.Inner" for a class) and its identity word:
	 * 0, or -1. */
	int (*type_name)(uint64_t type, char *buf, size_t n, uint64_t *tag);
	/* 3.14+: where a PEP 768 request for thread state `tstate` is written
	 * (struct strata_rexec). 0, or -1 with one line in why (an older
	 * Python, an interpreter built without remote debugging, unreadable). */
	int (*remote_exec)(uint64_t tstate, struct strata_rexec *out, char *why, size_t n);
	/* asyncio (pyasync-read.c): where its tasks are. debug is the
	 * address of the _asyncio module's debug offsets in the target (the
	 * .AsyncioDebug section of the object that holds _asyncio), 0 if not
	 * looked for yet. 0 found; 1 not imported (yet: ask again later); 2
	 * (3.14+) found but the debug offsets are needed: call again with
	 * them (UINT64_MAX: the target has none); -1 with one line in why
	 * when this reader cannot read them (a layout it was not built for). */
	int (*asyncio_find)(uint64_t debug, struct strata_asyncref *out, char *why, size_t n);
	/* Task `task`: its name and what it awaits into info, the frames of
	 * its coroutine chain into fr, leaf (innermost coroutine) first.
	 * Returns the number stored, -1 if it is not (or no longer) a task.
	 * With name 0 the name is not read (info->name is empty). */
	int (*task_read)(const struct strata_asyncref *a, uint64_t task, int name, struct strata_taskinfo *info,
			 struct strata_pyframe *fr, int max);
	/* The tasks awaiting `task` (directly, through gather, wait, shield,
	 * wait_for, or as the task of the TaskGroup it belongs to), up to
	 * max; -1 if unreadable. */
	int (*task_awaiters)(const struct strata_asyncref *a, uint64_t task, uint64_t *out, int max);
	/* The pending tasks in turn: up to max into out, going on from *c
	 * (zeroed: from the start), which is left where the next call goes on.
	 * Returns how many, or -1 if unreadable; *wrapped is set to 1 when
	 * the call went past the end of the last list (a round is complete). */
	int (*tasks_next)(const struct strata_asyncref *a, struct strata_taskcursor *c, uint64_t *out, int max,
			  int *wrapped);
	/* The thread running event loop `loop`: its pthread id and, where the
	 * interpreter keeps it (3.11+), its kernel id; 0 or -1 (not known). */
	int (*loop_thread)(const struct strata_asyncref *a, uint64_t loop, uint64_t *pthread_id, uint32_t *tid);
	/* The range of the interpreter's GIL state (where the threads that
	 * wait for it sleep), 0 or -1. */
	int (*gil_range)(uint64_t *lo, uint64_t *hi);
	/* The processes a reader serves: what it keeps of one (its
	 * environment, and what it found in that process's memory: types,
	 * the search of sys.modules for asyncio) is a target. The one
	 * strata_pyreader_init was given is every thread's until the thread
	 * uses another: target_new makes one for another process of the
	 * same interpreter build (NULL: out of memory), target_use makes it
	 * the calling thread's (NULL: back to init's), target_free frees it
	 * (no thread may be using it). */
	void *(*target_new)(const struct strata_remote *r);
	void (*target_use)(void *target);
	void (*target_free)(void *target);
};

/* Calls for one target are serialized by the caller; threads that use
 * targets of their own may call at once. */
typedef const struct strata_pyreader *(*strata_pyreader_init_fn)(const struct strata_remote *r);
#define STRATA_PYREADER_INIT_SYM "strata_pyreader_init"

#endif
