/*
 * pyapi.c — the module's entry tables: struct strata_pyapi, which
 * strata_pyapi_init hands the agent core, and (STRATA_REMOTE) struct
 * strata_pyreader, which strata_pyreader_init hands a reader of another
 * process; see pyapi.h and py-internal.h.
 *
 * Each entry lives with what it reads (frames and thread states in
 * pyframes.c, code objects in pycode.c, the layout checks in pylayout.c);
 * here are what the init functions are given (the core; a target's
 * environment, and the reader's targets: py-internal.h's struct rtarget)
 * and the entries that read no frame: where the interpreter's runtime and
 * types are, the reader's adapters to pyobjects.c, and where a PEP 768
 * request goes.
 */
#include "py-internal.h"

#include <string.h>

#include "pyobjects.h"

#ifndef STRATA_REMOTE
const struct strata_core *core;

static void py_symbols(struct strata_pysyms *out)
{
	out->runtime = (uint64_t)(uintptr_t)&_PyRuntime;
	out->code_type = (uint64_t)(uintptr_t)&PyCode_Type;
	out->frame_type = (uint64_t)(uintptr_t)&PyFrame_Type;
	out->unicode_type = (uint64_t)(uintptr_t)&PyUnicode_Type;
	out->bytes_type = (uint64_t)(uintptr_t)&PyBytes_Type;
}

/* ===== entry point ==================================================== */

static const struct strata_pyapi api = {
	.api_version = STRATA_PYAPI_VERSION,
	.built_for = PY_VERSION,
	.linetable_fmt = LINETABLE_FMT,
	.ready = py_ready,
	.phase = py_phase,
	.current_tstate = py_current_tstate,
	.walk = py_walk,
	.find_tstate = py_find_tstate,
	.read_code = py_read_code,
	.hook_code_death = py_hook_code_death,
	.starting_thread_name = py_starting_thread_name,
	.symbols = py_symbols,
	.api_frame = py_api_frame,
	.obj_type = pyobj_type,
	.type_name = pyobj_type_name,
	.running_task = py_running_task,
};

__attribute__((visibility("default"))) const struct strata_pyapi *strata_pyapi_init(const struct strata_core *c)
{
	core = c;
	return &api;
}
#else /* STRATA_REMOTE */

/* ===== entry points (reading another process) =========================== */

struct rtarget rtarget_first;
__thread struct rtarget *rtarget_cur;

static void *rp_target_new(const struct strata_remote *r)
{
	struct rtarget *t = calloc(1, sizeof(*t));
	if (t)
		t->env = *r;
	return t;
}

static void rp_target_use(void *t) { rtarget_cur = t; }

static void rp_target_free(void *t)
{
	if (t == rtarget_cur)
		rtarget_cur = NULL;
	free(t);
}

static int rp_read(void *ctx, void *dst, uint64_t src, size_t n)
{
	(void)ctx;
	return RENV.read(RENV.ctx, dst, src, n);
}

static uint64_t rp_obj_type(uint64_t block, uint64_t size, uint64_t *tag)
{
	return pyobj_type(rp_read, NULL, block, size, tag);
}

static int rp_type_name(uint64_t type, char *buf, size_t n, uint64_t *tag)
{
	return pyobj_type_name(rp_read, NULL, type, buf, n, tag);
}

/* PEP 768: the request's fields, located with the target's own
 * _Py_DebugOffsets (as sys.remote_exec locates them), checked against the
 * layout this reader was built for. */
static int rp_remote_exec(uint64_t tstate, struct strata_rexec *out, char *why, size_t n)
{
	memset(out, 0, sizeof(*out));
#if PY_VERSION_HEX >= 0x030E0000
#if !defined(Py_REMOTE_DEBUG) || !defined(Py_SUPPORTS_REMOTE_DEBUG)
	(void)tstate;
	snprintf(why, n, "this Python was built without remote debugging (PEP 768)");
	return -1;
#else
	_Py_DebugOffsets t;
	uint64_t at = RENV.syms.runtime + offsetof(_PyRuntimeState, debug_offsets);
	if (RENV.read(RENV.ctx, &t, at, sizeof(t)) || memcmp(t.cookie, _Py_Debug_Cookie, sizeof(t.cookie)) != 0) {
		snprintf(why, n, "cannot read the interpreter's debug offsets");
		return -1;
	}
	const struct _debugger_support *d = &t.debugger_support;
	if (d->remote_debugger_support != offsetof(PyThreadState, remote_debugger_support) ||
	    d->eval_breaker != offsetof(PyThreadState, eval_breaker) ||
	    d->debugger_pending_call != offsetof(_PyRemoteDebuggerSupport, debugger_pending_call) ||
	    d->debugger_script_path != offsetof(_PyRemoteDebuggerSupport, debugger_script_path) ||
	    d->debugger_script_path_size != sizeof(((_PyRemoteDebuggerSupport *)0)->debugger_script_path)) {
		snprintf(why, n, "the interpreter's debugger offsets differ from those of the Python %s headers",
			 PY_VERSION);
		return -1;
	}
	uint64_t interp = 0;
	int32_t enabled = 0;
	if (RENV.read(RENV.ctx, &interp, RENV.syms.runtime + t.runtime_state.interpreters_head, sizeof(interp)) ||
	    !interp || RENV.read(RENV.ctx, &enabled, interp + d->remote_debugging_enabled, sizeof(enabled))) {
		snprintf(why, n, "cannot read the main interpreter");
		return -1;
	}
	out->enabled = enabled;
	out->pending_call = tstate + d->remote_debugger_support + d->debugger_pending_call;
	out->script_path = tstate + d->remote_debugger_support + d->debugger_script_path;
	out->script_path_size = d->debugger_script_path_size;
	out->eval_breaker = tstate + d->eval_breaker;
	out->stop_bit = _PY_EVAL_PLEASE_STOP_BIT;
	return 0;
#endif
#else
	(void)tstate;
	snprintf(why, n, "sys.remote_exec (PEP 768) came with Python 3.14");
	return -1;
#endif
}

static const struct strata_pyreader reader = {
	.api_version = STRATA_PYAPI_VERSION,
	.built_for = PY_VERSION,
	.linetable_fmt = LINETABLE_FMT,
	.phase = rp_phase,
	.find_tstate = rp_find_tstate,
	.walk = rp_walk,
	.read_code = py_read_code,
	.qualname = rp_qualname,
	.check = rp_check,
	.threads = rp_threads,
	.obj_type = rp_obj_type,
	.type_name = rp_type_name,
	.remote_exec = rp_remote_exec,
	.asyncio_find = rp_asyncio_find,
	.task_read = rp_task_read,
	.task_awaiters = rp_task_awaiters,
	.tasks_next = rp_tasks_next,
	.loop_thread = rp_loop_thread,
	.gil_range = rp_gil_range,
	.target_new = rp_target_new,
	.target_use = rp_target_use,
	.target_free = rp_target_free,
};

__attribute__((visibility("default"))) const struct strata_pyreader *strata_pyreader_init(const struct strata_remote *r)
{
	rtarget_first.env = *r;
	return &reader;
}
#endif
