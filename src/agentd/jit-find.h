/*
 * jit-find.h — the GDB JIT descriptor of an LLVM that does not name it
 * (issue 12: Debian sid's libllvmlite.so links LLVM statically and is
 * stripped, so `__jit_debug_descriptor` is in neither .dynsym nor
 * .symtab).
 *
 * Two steps, neither a blind scan of memory: the file says where the
 * descriptor can be (jit_desc_candidates: its .data words laid out as a
 * fresh descriptor, a handful), and the running program says which one it
 * is (jit_desc_verify: only a descriptor holds a list of JIT entries that
 * lead to ELF images). The helper (jit-poll.c) keeps the candidates of
 * such an object and takes one as a descriptor once it verifies.
 */
#ifndef STRATA_AGENT_JIT_FIND_H
#define STRATA_AGENT_JIT_FIND_H

#include <stdint.h>

/* The GDB JIT interface (gdb/doc/gdb.texinfo, "JIT Interface"): the
 * descriptor a JIT registers its in-memory object files in, and one entry
 * of its list. */
struct gdb_jit_entry {
	uint64_t next, prev;
	uint64_t symfile_addr;
	uint64_t symfile_size;
};
struct gdb_jit_descriptor {
	uint32_t version;
	uint32_t action_flag;
	uint64_t relevant_entry;
	uint64_t first_entry;
};

/* Bytes: the largest JIT image the helper reads (a record must fit a
 * chunk); a bigger symfile is not taken for one. */
#define JIT_MAX_IMAGE (32u << 20)

/* More candidates than this in one object and the helper does not look
 * at it (an LLVM build has a few: three in Debian sid's and PyPI's
 * libllvmlite.so). */
#define JIT_DESC_MAX_CANDIDATES 32

/* The link-time addresses in the ELF file at `path` where a descriptor
 * can be: 8-aligned places in .data whose 24 bytes in the file are a
 * fresh descriptor ({version 1, no action, no entries}), into out.
 * Returns how many, 0 if none, -1 if the file cannot be read or has more
 * than `max`. */
int jit_desc_candidates(const char *path, uint64_t *out, int max);

/* Whether the target's memory at `addr` is a GDB JIT descriptor in use:
 * version 1, an action flag GDB knows (0-2), and a list of at least one
 * entry whose entries are 8-aligned, each pointing back at the one
 * before it (the first at none), each with the size of at least an ELF
 * header (and at most an image jit-poll.c reads) and the identification
 * of a 64-bit little-endian ELF file where its symfile points (the
 * first 64 entries checked). 0 when it is not, or not yet (no code
 * registered), or LLVM is editing the list right now: the caller asks
 * again later. */
int jit_desc_verify(uint64_t addr);

#endif
