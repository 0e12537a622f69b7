/*
 * target.c — see target.h: the registry of the modules' states, and
 * targets made of them.
 */
#include "target.h"

#include <stdio.h>
#include <stdlib.h>

#include "shm/agent.h"

static struct {
	size_t size;
	void (*init)(void *);
	void (*fini)(void *);
} mods[TARGET_MODS_MAX];
static int nmods;

__thread struct target *agentd_target;

void target_enter(struct target *t)
{
	agentd_target = t;
	if (t && t->state)
		agentp = t->state;
	if (t && t->reader_use)
		t->reader_use(t->reader);
}

int target_register(size_t size, void (*init)(void *))
{
	if (nmods >= TARGET_MODS_MAX) {
		fprintf(stderr, "strata-agentd: more module states than TARGET_MODS_MAX (%d)\n", TARGET_MODS_MAX);
		abort();
	}
	mods[nmods].size = size;
	mods[nmods].init = init;
	return nmods++;
}

struct target *target_new(pid_t pid)
{
	struct target *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	for (int i = 0; i < nmods; i++) {
		t->mod[i] = calloc(1, mods[i].size);
		if (!t->mod[i]) {
			target_free(t);
			return NULL;
		}
		if (mods[i].init)
			mods[i].init(t->mod[i]);
	}
	return t;
}

void target_on_free(int slot, void (*fini)(void *))
{
	if (slot >= 0 && slot < nmods)
		mods[slot].fini = fini;
}

void target_free(struct target *t)
{
	if (!t)
		return;
	for (int i = 0; i < nmods; i++) {
		if (t->mod[i] && mods[i].fini)
			mods[i].fini(t->mod[i]);
		free(t->mod[i]);
	}
	free(t);
}
