/*
 * snapshot.h — a readable copy of a .strata file that is still being
 * written: `strata ctl PID dump FILE` (in the agent) and the live view's
 * save key (in the CLI) both use it.
 *
 * The copy holds the file header and every whole chunk whose header and
 * payload check out among the first `len` bytes of the source (a chunk
 * another process is still appending, or a damaged one, is left out), and
 * then ends every process stream it leaves unfinished with a PROCESS_END
 * chunk (reason END_DETACH): the copy reads as a finished profile of
 * everything recorded so far, while the source grows on.
 */
#ifndef STRATA_SNAPSHOT_H
#define STRATA_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

/* Reads `in` with pread (its offset is untouched) and writes the copy to
 * `out` from its current position. Returns the bytes written, or -1 with a
 * one-line reason in err. */
int64_t snapshot_copy(int in, uint64_t len, int out, uint64_t end_mono_ns, char *err, size_t errlen);

#endif
