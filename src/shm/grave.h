/*
 * grave.h — code objects that died, for the writer.
 *
 * The writer resolves code objects a few milliseconds after they were
 * sampled; module bodies and exec() code are often freed by then. The
 * per-version module wraps the code type's deallocator, and for a code
 * object the handler has sampled, the profiled process writes its contents
 * at the moment it dies into this ring in the shared region; the helper's
 * writer takes them at the start of each pass. Producers are threads of
 * the profiled process (holding the GIL, so one at a time unless
 * sub-interpreters have GILs of their own: a spin lock orders them); the
 * consumer is the writer. A full ring drops the record (counted): the
 * code object is then named as freed before it was read.
 */
#ifndef STRATA_GRAVE_H
#define STRATA_GRAVE_H

#include <stdint.h>

#include "py/pyapi.h"

struct graveyard;

/* Profiled process: records the death of the code object at addr. */
void grave_put(struct graveyard *g, uint64_t addr, uint64_t t, const struct strata_codeinfo *ci);

/* Writer: the next record, its contents in *ci (strings malloc'ed, freed
 * by the caller with free()). Returns 1, or 0 when the ring is empty. */
int grave_take(struct graveyard *g, uint64_t *addr, uint64_t *t, struct strata_codeinfo *ci);

#endif
