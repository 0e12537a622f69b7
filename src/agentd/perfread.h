/*
 * perfread.h — the agent copies its process's perf map (/tmp/perf-PID.map,
 * written by CPython 3.12's -X perf and by other JITs) and the code-load
 * records of /tmp/jit-PID.dump (CPython 3.13's -X perf_jit) into the
 * profile as REC_PERFMAP records, so that the CLI names code in anonymous
 * executable memory offline. Writer thread only (under the writer's lock),
 * never the signal handler.
 */
#ifndef STRATA_PERFREAD_H
#define STRATA_PERFREAD_H

#include <stdint.h>

#include "common/wire.h"

/* Writer pass, before the rings are drained, and again before a stack
 * with an address in no object is written: appends REC_PERFMAP records
 * for entries not yet in this stream (new lines since the last pass, or
 * every entry known after a stream reset) to `recs`. Cheap when nothing
 * changed: a stat and an fstat per file,
 * or a failed open while it does not exist. */
void perfread_poll(struct wbuf *recs);

/* Writer, before a REC_STACK with native addresses: a return address in
 * no object that is just past the call of one of CPython's perf
 * trampolines (recognized by its bytes, as the unwinder does) gets an
 * entry now if none was read for it, so that the stack is never read
 * before its trampolines are named: CPython 3.13's -X perf_jit writes its
 * jitdump through a buffered stream, up to 4 KiB late. */
void perfread_cover(const uint64_t *addrs, uint32_t n, struct wbuf *recs);

/* A new stream starts (fork child, attach, resumed exec): every entry
 * known so far is written again, since the code they name is still mapped. */
void perfread_stream_reset(void);

/* Entries the agent writes itself (--perf-map, jitdump.c) name JIT images
 * the profile already holds: not copied back. Any thread. */
void perfread_note_own(uint64_t start);

#endif
