/*
 * target.h — the processes strata-agentd serves, and each module's state
 * for one of them.
 *
 * A module of the helper keeps what it knows of a profiled process (its
 * memory descriptor, its rings' writer, its JIT images, its loaded
 * objects, its tasks...) in a state of its own, whose layout stays in the
 * module's file: the module declares it with TARGET_STATE, which gives it
 * a slot in every target, and reads it through the current target.
 *
 * A helper serves the process it was started for and the fork children
 * that join it (docs/hacking.md, "One helper per process tree"): a
 * target for each, the main and writer threads switching between them,
 * a wall sampler and a control thread per target.
 */
#ifndef STRATA_AGENTD_TARGET_H
#define STRATA_AGENTD_TARGET_H

#include <stddef.h>
#include <sys/types.h>

#define TARGET_MODS_MAX 24

struct agent_state;

struct target {
	pid_t pid;
	struct agent_state *state;  /* its state in the shared region, once mapped */
	void *reader;               /* the interpreter reader's target (pyapi.h), once loaded */
	void (*reader_use)(void *reader);
	void *mod[TARGET_MODS_MAX];
};

/* The process the calling thread works for (each thread of the helper
 * enters its target when it starts). */
extern __thread struct target *agentd_target;

/* The calling thread works for t from now on: agentd_target, agentp
 * (shm/agent.h's `agent`) once t's state is mapped, and the reader's
 * target once the reader is loaded. */
void target_enter(struct target *t);

/* A target for process pid, every module's state in it made and set to
 * its start; NULL when out of memory. */
struct target *target_new(pid_t pid);
/* Frees a target's states, each after its module's fini (what the state
 * points to), if the module gave one (target_on_free, for its slot). */
void target_free(struct target *t);
void target_on_free(int slot, void (*fini)(void *));

/* For TARGET_STATE: the slot of a state of `size` bytes, set to its start
 * by init (NULL: zeros). Called before main(); aborts past TARGET_MODS_MAX. */
int target_register(size_t size, void (*init)(void *));

/* Registers a state of `type` before main(), its slot into the int
 * variable `slot` (for a state several files share: the slot is theirs
 * to declare). */
#define TARGET_REGISTER(slot, type, init)                                                     \
	__attribute__((constructor)) static void slot##_register(void)                        \
	{                                                                                     \
		slot = target_register(sizeof(type), (void (*)(void *))(init));               \
	}

/*
 * In a module: TARGET_STATE(struct x_state, x, x_init) registers the
 * module's state, and x_of(t) is target t's; the module then names the
 * current target's with a macro, e.g. #define X (*x_of(agentd_target)).
 */
#define TARGET_STATE(type, name, init)                                                        \
	static int name##_slot;                                                               \
	TARGET_REGISTER(name##_slot, type, init)                                              \
	static inline type *name##_of(struct target *t) { return (type *)t->mod[name##_slot]; }

#endif
