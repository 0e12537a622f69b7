/*
 * py-internal.h — what the files of the per-version module share (the
 * module itself: pyapi.h): the interpreter's own headers, where the
 * interpreter is (this process, or the target of the reader build), the
 * code object's layout per version, and the entries the tables in pyapi.c
 * point to. Shared by pyframes.c (frames and thread states), pycode.c
 * (code objects), pylayout.c (the layout checks) and pyapi.c (the entry
 * tables); nothing else includes it. Each of them includes it first (it
 * includes Python.h, which comes before any system header). Every symbol
 * declared here stays inside the module (built with -fvisibility=hidden).
 */
#ifndef STRATA_PY_INTERNAL_H
#define STRATA_PY_INTERNAL_H

#define Py_BUILD_CORE 1
#include <Python.h>
#include <frameobject.h>

#include <internal/pycore_pystate.h>
#if PY_VERSION_HEX >= 0x03090000
/* 3.8 keeps _PyRuntimeState and PyInterpreterState in pycore_pystate.h. */
#include <internal/pycore_runtime.h>
#include <internal/pycore_interp.h>
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_code.h>
#include <internal/pycore_frame.h>
#endif
#if PY_VERSION_HEX >= 0x030E0000
/* 3.14 moved _PyInterpreterFrame into pycore_interpframe_structs.h (with
 * pycore_interpframe.h for its helpers and pycore_stackref.h for the
 * tagged references it holds); 3.15 finds the calling thread's state
 * through the GIL and the thread list (pycore_gil.h). */
#include <internal/pycore_interpframe.h>
#include <internal/pycore_gil.h>
#include <internal/pycore_ceval.h>   /* _PY_EVAL_PLEASE_STOP_BIT, Py_SUPPORTS_REMOTE_DEBUG (PEP 768) */
#endif

#include <stddef.h>
#include <stdint.h>

#include "pyapi.h"
#include "common/format.h"

/* ===== where the interpreter is ========================================= */

#ifdef STRATA_REMOTE
/* What the reader keeps of one target process (strata_pyreader.target_new,
 * pyapi.c): how to read it, and what was found in its memory, which
 * another process (a fork child, whose heap goes its own way) must not
 * be answered from. The calling thread's is RT: the one init was given
 * until the thread uses another. */
#define KINDS_CACHE 64
struct rtarget {
	struct strata_remote env;
	struct {                       /* pyasync.c: object kinds by type */
		uint64_t type[KINDS_CACHE];
		int kind[KINDS_CACHE];
		unsigned next;
	} kinds;
	struct {                       /* pyasync-read.c: sys.modules searched, no asyncio */
		uint64_t mods, keys;
		int64_t searched;
	} absent;
	uint64_t partial_good, partial_bad; /* pyasync-await.c: functools.partial's type */
};
extern struct rtarget rtarget_first;
extern __thread struct rtarget *rtarget_cur;
#define RT (rtarget_cur ? rtarget_cur : &rtarget_first)
#define RENV (RT->env)
#define RUNTIME ((_PyRuntimeState *)(uintptr_t)RENV.syms.runtime)
#define T_CODE ((PyTypeObject *)(uintptr_t)RENV.syms.code_type)
#define T_FRAME ((PyTypeObject *)(uintptr_t)RENV.syms.frame_type)
#define T_UNICODE ((PyTypeObject *)(uintptr_t)RENV.syms.unicode_type)
#define T_BYTES ((PyTypeObject *)(uintptr_t)RENV.syms.bytes_type)
#else
/* The core's services, as strata_pyapi_init was given them (pyapi.c). */
extern const struct strata_core *core;
#define RUNTIME (&_PyRuntime)
#define T_CODE (&PyCode_Type)
#define T_FRAME (&PyFrame_Type)
#define T_UNICODE (&PyUnicode_Type)
#define T_BYTES (&PyBytes_Type)
#endif

/* ===== reading its memory ============================================== */

/*
 * Every load from interpreter memory is written LD(lvalue): a plain load in
 * the in-process build (the signal handler's fault guard catches a bad
 * pointer), a checked read of the target in the reader build, where a
 * failed read longjmps to remote_fail, which each entry point sets with
 * setjmp after remote_begin (pyframes.c).
 */
#ifdef STRATA_REMOTE
#include <setjmp.h>
extern __thread jmp_buf remote_fail;
void remote_begin(void);
void remote_load(void *dst, const void *src, size_t n);
#define LD(lv) ({ __typeof__(lv) ld_v_; remote_load(&ld_v_, &(lv), sizeof(ld_v_)); ld_v_; })
#else
#define LD(lv) (lv)
#endif
/* An object's type, through LD; NULL where the object or the type is not
 * 8-byte aligned, as none is (a stale or torn pointer read from the
 * target: reading a member through it is a misaligned access, which the
 * UBSan build stops at, make ubsan-func). */
#define ALIGNED8(p) (!((uintptr_t)(p) & 7))
#define TYPE_OF(o) ({ \
	PyTypeObject *type_of_ = ALIGNED8(o) ? LD(((PyObject *)(o))->ob_type) : NULL; \
	ALIGNED8(type_of_) ? type_of_ : NULL; \
})

/* ===== the code object, per version ===================================== */

/*
 *   LINETABLE_FMT        the LT_* id of CODE_LINETABLE's bytes
 *   CODE_LINETABLE(co)   the code object's line table (a bytes object)
 *   CODE_QUALNAME(co)    its qualified name (a str), NULL before 3.11
 * The frame and thread-state accessors of each version are in pyframes.c.
 */
#if PY_VERSION_HEX < 0x030A0000
#define LINETABLE_FMT LT_LNOTAB
#define CODE_LINETABLE(co) ((co)->co_lnotab)
#elif PY_VERSION_HEX < 0x030B0000
#define LINETABLE_FMT LT_LINETABLE
#define CODE_LINETABLE(co) ((co)->co_linetable)
#else
#define LINETABLE_FMT LT_LOCATIONS
#define CODE_LINETABLE(co) ((co)->co_linetable)
#endif
#if PY_VERSION_HEX < 0x030B0000
/* No co_qualname before 3.11: see srcqual.h. */
#define CODE_QUALNAME(co) ((PyObject *)NULL)
#else
#define CODE_QUALNAME(co) ((co)->co_qualname)
#endif

/* ===== entries (pyapi.h says what each does) ============================ */

/* pyframes.c */
int py_phase(void);
#ifndef STRATA_REMOTE
int py_ready(void);
void *py_current_tstate(void);
int py_walk(void *tstate, struct strata_pyframe *out, int max, uint32_t *missing, int *gc);
void *py_find_tstate(unsigned long pthread_id);
int py_starting_thread_name(char *buf, size_t n);
#else
int rp_phase(void);
uint64_t rp_find_tstate(unsigned long pthread_id);
int rp_walk(uint64_t tstate, struct strata_pyframe *out, int max, uint32_t *missing, int *gc);
int rp_threads(struct strata_pythread *out, int max);
#endif

/* pyframes.c, for pyasync*.c */
int py_frame_info(const void *frame, struct strata_pyframe *out);
int py_chain_index(void *ts, const void *target);
void *py_frame_code(const void *frame);

/* pycode.c */
int py_read_code(uint64_t addr, struct strata_codeinfo *out);
#ifndef STRATA_REMOTE
int py_hook_code_death(int (*wanted)(uint64_t), void (*on_death)(uint64_t, struct strata_codeinfo *));
#else
char *rp_qualname(const char *filename, uint32_t firstlineno, const char *name);
#endif

/* pycode.c: a str object's text (malloc'ed UTF-8), or NULL */
char *py_read_strobj(uint64_t addr);

/* pyasync.c (handler), pyasync-read.c and pyasync-await.c (reader) */
#ifndef STRATA_REMOTE
uint64_t py_running_task(void *tstate, const struct strata_asyncref *a, struct strata_taskhint *hint);
#else
int rp_asyncio_find(uint64_t debug, struct strata_asyncref *out, char *why, size_t n);
int rp_task_read(const struct strata_asyncref *a, uint64_t task, int name, struct strata_taskinfo *info,
		 struct strata_pyframe *fr, int max);
int rp_task_awaiters(const struct strata_asyncref *a, uint64_t task, uint64_t *out, int max);
int rp_tasks_next(const struct strata_asyncref *a, struct strata_taskcursor *c, uint64_t *out, int max, int *wrapped);
int rp_loop_thread(const struct strata_asyncref *a, uint64_t loop, uint64_t *pthread_id, uint32_t *tid);
int rp_gil_range(uint64_t *lo, uint64_t *hi);
#endif

/* pylayout.c */
#ifndef STRATA_REMOTE
int py_api_frame(struct strata_pyframe *out, char *name, size_t n);
#else
int rp_check(const char *exe, char *why, size_t n);
#endif

#endif
