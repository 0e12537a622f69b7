/*
 * stack-native.h — `strata stack --native`: a paused thread's native stack
 * unwound from outside (its registers from ptrace, its stack through
 * /proc/PID/mem, each object's .eh_frame compiled by common/cfi.c), named
 * by the CLI's symbolizer and merged with the thread's Python frames as
 * `strata record --native` merges them (lib/merge.h: each eval-loop
 * activation replaced by the Python frames it runs).
 */
#ifndef STRATA_STACK_NATIVE_H
#define STRATA_STACK_NATIVE_H

#include <stdint.h>
#include <sys/user.h>

#include "py/pyapi.h"
#include "pyproc.h"

struct stack_native;

/* The process's executable mappings, read now (while it is paused). NULL
 * on allocation failure. */
struct stack_native *stack_native_new(struct pyproc *p);
/* The same; with precompile 0 each object's unwind table is compiled when
 * a walk first needs it (attaching walks a few objects, not all). */
struct stack_native *stack_native_open(struct pyproc *p, int precompile);
void stack_native_free(struct stack_native *sn);

/* Compiles now the unwind table of the object at path (as the maps name
 * it), so that a walk need not (while the process is paused). */
void stack_native_compile(struct stack_native *sn, const char *path);

/* With defer set, a walk that reaches an object whose table is not
 * compiled yet stops there (SN_NO_CFI) and marks it wanted, instead of
 * compiling it while the process is paused; stack_native_compile_wanted
 * compiles those (after the pause) and returns how many. */
void stack_native_defer(struct stack_native *sn, int defer);
int stack_native_compile_wanted(struct stack_native *sn);

/* Stack memory [lo, lo + n) copied once: the walks read it from buf, not
 * from the process, until it is set again (buf NULL: no copy). */
void stack_native_set_stack(struct stack_native *sn, uint64_t lo, const void *buf, size_t n);

/* One frame of a walk: its pc, the stack pointer in it, and whether pc is
 * exact (the instruction the thread or a signal stopped at: the leaf, or
 * the frame under a signal frame) or a return address (pc - 1 is the
 * call). */
struct snstep {
	uint64_t pc, sp;
	int exact;
};

/* Why a walk ended. */
enum {
	SN_COMPLETE,    /* at the outermost frame (no return address) */
	SN_NO_CFI,      /* the last pc is in no object with unwind information */
	SN_UNREADABLE,  /* a saved register could not be read */
	SN_UNSUPPORTED, /* a rule strata cannot evaluate */
	SN_NOT_OUTWARD, /* the next frame was not further up the stack: a bad rule or a corrupt stack */
	SN_DEFERRED,    /* the last pc's object has its table not compiled yet (stack_native_defer) */
	SN_MAX,         /* max frames */
};

/* Unwinds from regs, leaf first, into out (at most max); the reason it
 * ended in *stop. The stack from the last frame's sp up is not accounted
 * for by the walk unless it is SN_COMPLETE. Returns the number of frames. */
int stack_native_walk(struct stack_native *sn, const struct user_regs_struct *regs, struct snstep *out, int max,
		      int *stop);

/* The function and object at pc (call: pc is a return address), either
 * NULL when unknown; valid until stack_native_free. */
void stack_native_name(struct stack_native *sn, uint64_t pc, int call, const char **name, const char **module);

/* Unwinds from regs, leaf first, into pcs (at most max). *complete is set
 * when the walk reached the outermost frame (no return address). Returns
 * the number of frames. */
int stack_native_unwind(struct stack_native *sn, const struct user_regs_struct *regs, uint64_t *pcs, int max,
			int *complete);

/* One frame of the merged stack, leaf first. */
struct snframe {
	int python;            /* else native */
	int py_index;          /* python: index into the Python frames given */
	const char *name;      /* native: function (or NULL), module, file:line */
	const char *module;
	const char *file;
	uint32_t line;
	uint64_t pc;
	uint64_t offset;       /* native: address in the object's ELF space */
};

/* Merges a thread's native frames (pcs, leaf first) with its Python frames
 * (py, leaf first). Returns the number of frames stored in out (room for
 * npy + 2 * npcs). */
int stack_native_merge(struct stack_native *sn, const uint64_t *pcs, int npcs, int complete,
		       const struct strata_pyframe *py, int npy, struct snframe *out);

#endif
