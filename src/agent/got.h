/*
 * got.h — redirect calls that other loaded objects make to named
 * functions by rewriting their GOT slots, and put them back (got.c).
 */
#ifndef STRATA_GOT_H
#define STRATA_GOT_H

#include <link.h>

struct got_fn {
	const char *name; /* the symbol the objects import */
	void *hook;       /* what their slots are made to hold */
	void *real;       /* its real address: a slot bound to it is taken */
	void *alias;      /* another address it has, or NULL: the canonical
			   * PLT entry a non-PIE executable gives it when it
			   * takes its address (GLOB_DAT slots bind there) */
};

/* Which of the functions (a bit per index) to redirect in this object. */
typedef unsigned (*got_mask_fn)(const struct dl_phdr_info *info, void *arg);

/* Redirects the slots of every loaded object not visited before, and
 * stays on: got_refresh visits the objects loaded since. Returns how many
 * slots it took. `fn` must outlive the redirection. Thread-safe; not for
 * signal handlers. */
int got_apply(const struct got_fn *fn, int nfn, got_mask_fn mask, void *arg);
/* While on (after got_apply, before got_restore): the objects loaded since
 * are redirected too. Returns how many slots it took. */
int got_refresh(void);
/* Puts back every slot still holding our hook, forgets every object and
 * turns off. Returns how many slots it put back. */
int got_restore(void);
/* Whether on. */
int got_enabled(void);
/* Whether objects were loaded or unloaded since the last got_apply. */
int got_loaded_since(void);
/* What a call from the object containing `in` to `name` reaches: its
 * bound JUMP_SLOT (the object must be bound now: -z now), or NULL. */
void *got_bound(const void *in, const char *name);
/* Whether `addr` lies in one of the object's loaded segments. */
int got_contains(const struct dl_phdr_info *info, const void *addr);

#endif
