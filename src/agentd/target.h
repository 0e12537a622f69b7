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
 * Today a helper serves the one process it was started for: main()
 * makes its target first thing, and every thread of the helper works for
 * it. This is the first step to one helper serving a whole process tree
 * (docs/hacking.md, "One helper per process tree"): a target for each
 * process, and the helper's threads switching between them.
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
/* Frees a target's states (what they point to is the modules' to free
 * first). */
void target_free(struct target *t);

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
