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
void stack_native_free(struct stack_native *sn);

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
