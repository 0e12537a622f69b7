/*
 * jitdump-enc.h — Linux perf's jitdump format (tools/perf/Documentation/
 * jitdump-specification.txt), written for the JIT images the agent sees
 * with --perf-map: a file header, then per function of an image a
 * JIT_CODE_DEBUG_INFO record (its line table, from the image's
 * .debug_line when it has one) followed by its JIT_CODE_LOAD record (name
 * and code bytes). `perf inject --jit` turns each load into a small ELF
 * file that `perf report` symbolizes, lines included.
 *
 * Pure encoding into a wbuf: the agent (src/agentd/jitdump.c) supplies the
 * code bytes and the output file; the unit tests run it on saved images.
 */
#ifndef STRATA_JITDUMP_ENC_H
#define STRATA_JITDUMP_ENC_H

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define JITDUMP_MAGIC 0x4A695444u /* "JiTD" */
#define JITDUMP_VERSION 1
#define JITDUMP_HDR_SIZE 40
enum { JIT_CODE_LOAD = 0, JIT_CODE_MOVE = 1, JIT_CODE_DEBUG_INFO = 2, JIT_CODE_CLOSE = 3 };

/* The file header; timestamps are CLOCK_MONOTONIC ns (perf record -k 1). */
void jd_header(struct wbuf *b, uint32_t pid, uint64_t timestamp);

/* Copies n bytes of code running at addr into dst; 0 or -1. */
typedef int (*jd_read_code)(void *ctx, uint64_t addr, void *dst, size_t n);

struct jd_image_stats {
	uint32_t functions;   /* JIT_CODE_LOAD records written */
	uint32_t with_lines;  /* ... preceded by a JIT_CODE_DEBUG_INFO record */
	uint64_t line_rows;   /* debug-info entries in all */
	int lines_error;      /* .debug_line present but malformed: no lines written */
};

/* Per function of the ELF image (in memory, section addresses at run
 * time): the records described above, appended to `b`. *code_index is
 * the running JIT_CODE_LOAD counter. `fn` (optional) is called per
 * function, for the perf map. Returns 0, or -1 if the image cannot be
 * read (nothing appended). */
typedef void (*jd_func_cb)(void *ctx, const char *name, uint64_t addr, uint64_t size);
int jd_image(struct wbuf *b, const void *image, size_t size, uint32_t pid, uint32_t tid, uint64_t timestamp,
	     uint64_t *code_index, jd_read_code read_code, void *read_ctx, jd_func_cb fn, void *fn_ctx,
	     struct jd_image_stats *stats);

/* For readers that cannot map the code (unit tests, saved images): reads
 * code from the image's own section contents. ctx: the image (struct
 * jitelf *). */
int jd_read_from_image(void *ctx, uint64_t addr, void *dst, size_t n);

#endif
