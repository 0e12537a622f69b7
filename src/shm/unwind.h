/*
 * unwind.h — native stack unwinding for --native: the capture the signal
 * handler calls (unwind.c, in the profiled process), and the helper's
 * upkeep of unwind tables and module records (unwind-build.c).
 */
#ifndef STRATA_UNWIND_H
#define STRATA_UNWIND_H

#include <stdint.h>

#include "common/wire.h"

struct tslot;

/* Profiled process, at start: what the handler looks up once. */
void unwind_handler_init(void);

/* Helper: scans the target's loaded objects and publishes the first
 * snapshot. Returns 0 or -1. */
int unwind_init(void);

/* Helper, writer pass: notices objects loaded or unloaded since the last call,
 * publishes new tables, appends REC_MODULE records for objects not yet
 * announced in this stream to `recs` (when not NULL), and frees tables no
 * handler can still be using. Returns 1 if the set changed, 0, or -1. */
int unwind_poll(struct wbuf *recs);

/* Helper's writer, before a REC_STACK: the objects its native addresses point into
 * must be announced first (REC_MODULE in `recs`), also those loaded since
 * the last pass, which the handler found with _dl_find_object. Returns 1
 * when an address was in no object known before (so the objects were
 * read again): generated code, or an object mapped since; else 0. */
int unwind_cover(const uint64_t *addrs, uint32_t n, struct wbuf *recs);

/* Helper's writer: whether pc is in an object of the current snapshot (else it is
 * run-time generated code, or an object not scanned yet). */
int unwind_in_object(uint64_t pc);

/* A new stream starts (fork child, resumed exec): announce every object again. */
void unwind_stream_reset(void);

/* Handler: unwinds the interrupted context `uc` of the calling thread into
 * out[0..max) (out[0] is the interrupted pc, the rest return addresses),
 * setting STACK_NATIVE_* in *flags when it stops early. Must run under the
 * capture's fault guard. Returns the number of addresses stored. */
int unwind_capture(struct tslot *s, const void *uc, uint64_t *out, int max, uint8_t *flags);

/* JIT code (jit.c, --native): the ranges unwind with the CFI of the
 * loaded .eh_frame at [eh, eh + eh_len) (0: none), and the functions of
 * funcs[0..nfuncs) (sorted, disjoint) that it has no FDE for with rules
 * derived from their machine code (cfi-synth.h). */
void unwind_jit_add(uint64_t id, const uint64_t (*ranges)[2], uint32_t nranges, uint64_t eh, uint64_t eh_len,
		    const uint64_t (*funcs)[2], uint32_t nfuncs);
void unwind_jit_remove(uint64_t id);

/* Memory the compiled tables take (bench and diagnostics). */
uint64_t unwind_table_bytes(void);

#endif
