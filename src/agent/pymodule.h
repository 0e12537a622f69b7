/*
 * pymodule.h — the per-version module (strata-py-X.Y.Z.so) in the
 * profiled process: finding and loading it, and the check on a live frame
 * of one built for another patch release (pymodule.c).
 */
#ifndef STRATA_PYMODULE_H
#define STRATA_PYMODULE_H

#include <stddef.h>

struct strata_pyapi;

/* The module for Python `version` from directory dir, or NULL: `tried`
 * lists the versions there, `why` says why a module found was refused;
 * *other_patch: built for another patch release of the same X.Y. */
const struct strata_pyapi *load_pymodule(const char *dir, const char *version, char *tried, size_t tlen,
					 char *why, size_t whylen, int *other_patch);
/* Arms the check of a module built for another patch release (before
 * 3.13); -1 if it cannot be (the module is then refused). */
int layout_arm(void);
/* Runs the check if it is still to be done; with the GIL held. */
void layout_decide(void);

#endif
