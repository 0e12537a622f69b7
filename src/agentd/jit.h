/*
 * jit.h — the agent's view of JIT-compiled code (issue 5).
 *
 * jit.c (owner: JIT discovery) watches the GDB JIT interface
 * (__jit_debug_descriptor / __jit_debug_register_code) for in-memory ELF
 * images registered and unregistered at any time, stores each image in the
 * profile (REC_JIT_IMAGE / REC_JIT_UNLOAD) and feeds its .eh_frame to the
 * native unwinder.
 *
 * Other modules that want to hear about images (jitdump.c: --perf-map
 * writes /tmp/perf-PID.map and jit-PID.dump) register a listener. This
 * header is the contract between them; both sides code against it.
 */
#ifndef STRATA_AGENT_JIT_H
#define STRATA_AGENT_JIT_H

#include <stddef.h>
#include <stdint.h>

struct jit_image {
	uint64_t id;        /* unique within the process; REC_JIT_IMAGE's id */
	const void *elf;    /* the in-memory ELF symfile, as registered */
	size_t size;
};

/* Called outside signal context, in the thread that registered or
 * unregistered the image (or the thread that found it already registered),
 * after the image was recorded; `registered` is 1 for a new image, 0 when
 * it is unregistered (the memory is still readable during the call). */
typedef void (*jit_listener)(const struct jit_image *img, int registered);

/* At most a few listeners; call from agent start-up, before any image can
 * be seen. Images already registered when a listener is added are
 * replayed to it. Returns 0, or -1 when the table is full. */
int jit_add_listener(jit_listener fn);

#endif
