/*
 * jitsym.h — JIT code symbolized offline from the images a process stored
 * (REC_JIT_IMAGE, REC_JIT_UNLOAD): the function (from the image's symbol
 * table, Numba names demangled) and, when the image has DWARF (Numba with
 * NUMBA_DEBUGINFO=1, `strata record --jit-lines`), the Python file and line
 * the machine code was compiled from. One jit_space per process stream.
 */
#ifndef STRATA_JITSYM_H
#define STRATA_JITSYM_H

#include <stddef.h>
#include <stdint.h>

#include "common/format.h"

struct jit_space;

struct jit_space *jit_space_new(void);
void jit_space_free(struct jit_space *sp);
/* Adds an image (copied). Returns 0 (also for an image that cannot be
 * read, whose code then stays unnamed), or -1 on OOM. */
int jit_space_add(struct jit_space *sp, const struct rec_jit_image *r);
void jit_space_unload(struct jit_space *sp, uint64_t id);

struct jit_info {
	const char *module;   /* "[jit #ID]" */
	uint64_t image;       /* its id */
	const char *name;     /* readable function name, NULL if no symbol covers it */
	int numba_kind;       /* enum numba_kind, -1 for a name Numba did not mangle */
	uint64_t func_start;
	uint64_t func_end;    /* end of its symbol, when name is set */
	const char *file;     /* source of the line executing (DWARF), NULL if none */
	uint32_t line;
	const char *func_file;/* where the function is defined, NULL if unknown */
	uint32_t func_line;
};

/* Returns 1 and fills *out when addr (a return address if `call`) is in a
 * live image of sp, else 0. Strings live as long as sp. */
int jit_lookup(struct jit_space *sp, uint64_t addr, int call, struct jit_info *out);

/* The same, also in images unloaded since (the newest image that had addr
 * wins): for looking at code after the fact, like `annotate --asm`. */
int jit_lookup_any(struct jit_space *sp, uint64_t addr, int call, struct jit_info *out);

/* The machine code of the executable section holding addr (as stored in
 * the image: calls to other objects unrelocated), unloaded images
 * included. Returns 0 or -1. */
int jit_image_bytes(const struct jit_space *sp, uint64_t addr, const uint8_t **code, uint64_t *start,
		    uint64_t *len);

/* The JIT space of the profile's process with an image (live or
 * unloaded) that held addr (native.c), or NULL: for `annotate --asm`. */
struct profile;
struct jit_space *profile_jit_space(const struct profile *p, uint64_t addr);

#endif
