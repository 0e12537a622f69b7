/*
 * fuzz_jitpoll.c — libFuzzer target for the helper's reader of the GDB
 * JIT interface (src/agentd/jit-poll.c, jit-find.c): the descriptor, its
 * list of entries, each entry's in-memory ELF image, all read out of the
 * profiled process's memory, which the program (or a bug in it) can leave
 * in any state.
 *
 * The target's memory is the input (a fake remote_read over it, mapped at
 * BASE); the helper's state is jit-poll.c's own statics (the file is
 * included, so each input starts from a clean state). Input: u8 flags,
 * u32 offset of the descriptor, then the memory.
 *   flag 1  the descriptor was named (symbol table) rather than found
 *           as a candidate that must verify (jit_desc_verify) first;
 *   flag 2  native unwinding on (images handed to the unwinder);
 *   flag 4  after two passes the list is emptied and a third pass must
 *           unload every image.
 * Every REC_JIT_IMAGE / REC_JIT_UNLOAD written must decode again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

#include "../../src/agentd/jit-find.c"
#include "../../src/agentd/jit-poll.c"
#include "../../src/agentd/target.c"

#define BASE 0x10000ull

/* ---- the helper's surroundings ------------------------------------------- */

static struct agent_state fake_agent;
struct agent_state *agentp = &fake_agent;

static uint8_t *mem;
static size_t mem_len;
static uint32_t unwind_images;

int remote_read(void *dst, uint64_t addr, size_t n)
{
	if (addr < BASE || addr - BASE > mem_len || n > mem_len - (addr - BASE))
		return -1;
	memcpy(dst, mem + (addr - BASE), n);
	return 0;
}

/* No loaded objects: the descriptors are given (add_desc, pending). */
int remote_objects(int (*fn)(const struct robj *o, void *data), void *data)
{
	(void)fn;
	(void)data;
	return 0;
}

uint64_t remote_objects_gen(void)
{
	return 1;
}

void agent_log(const char *fmt, ...)
{
	(void)fmt;
}

uint64_t mono_ns(void)
{
	return 1;
}

/* What the unwinder is handed must be what the image says. */
void unwind_jit_add(uint64_t id, const uint64_t (*ranges)[2], uint32_t nranges, uint64_t eh, uint64_t eh_len,
		    const uint64_t (*funcs)[2], uint32_t nfuncs)
{
	(void)id;
	(void)eh;
	(void)eh_len;
	for (uint32_t i = 0; i < nranges; i++)
		FUZZ_CHECK(ranges[i][0] < ranges[i][1]);
	for (uint32_t i = 0; i < nfuncs; i++) {
		FUZZ_CHECK(funcs[i][0] < funcs[i][1]);
		FUZZ_CHECK(i == 0 || funcs[i - 1][1] <= funcs[i][0]);
	}
	unwind_images++;
}

void unwind_jit_remove(uint64_t id)
{
	(void)id;
	FUZZ_CHECK(unwind_images > 0);
	unwind_images--;
}

/* A listener, as --perf-map's is: sees the image bytes. */
static uint32_t listened;
static void listener(const struct jit_image *img, int registered)
{
	FUZZ_CHECK(img->elf && img->size);
	volatile uint8_t last = ((const uint8_t *)img->elf)[img->size - 1];
	(void)last;
	if (registered)
		listened++;
	else
		listened--;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_setup();
	/* The helper's state for its one target (target.h). */
	agentd_target = target_new(getpid());
	if (!agentd_target)
		abort();
	return 0;
}

/* Back to a helper that has seen nothing. */
static void reset(void)
{
	while (J.imgs) {
		struct jimg *g = J.imgs;
		J.imgs = g->next;
		img_free(g);
	}
	memset(&J, 0, sizeof(J));
	pthread_mutex_init(&J.lock, NULL);
	J.next_id = 1;
	memset(&fake_agent, 0, sizeof(fake_agent));
	unwind_images = 0;
	listened = 0;
}

/* The records a pass wrote decode again. */
static void check_records(const struct wbuf *b)
{
	struct rbuf in, body;
	rbuf_init(&in, b->data, b->len);
	uint64_t type;
	int r;
	while ((r = rec_next(&in, &type, &body)) == 1) {
		if (type == REC_JIT_IMAGE) {
			struct rec_jit_image ji;
			FUZZ_CHECK(rec_get_jit_image(&body, &ji) == 0);
			FUZZ_CHECK(ji.image_len >= sizeof(Elf64_Ehdr));
			rec_free_jit_image(&ji);
		} else {
			struct rec_jit_unload u;
			FUZZ_CHECK(type == REC_JIT_UNLOAD && rec_get_jit_unload(&body, &u) == 0);
		}
	}
	FUZZ_CHECK(r == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fin in = { data, size };
	uint8_t flags = fin_u8(&in);
	uint64_t desc = BASE + fin_u32(&in);
	mem = malloc(in.n ? in.n : 1);
	if (!mem)
		return 0;
	memcpy(mem, in.p, in.n);
	mem_len = in.n;
	reset();
	fake_agent.cfg.native = (flags & 2) != 0;
	jit_add_listener(listener);
	if (flags & 1) {
		add_desc(desc);
	} else {
		J.pending[0].addr = desc;
		J.npending = 1;
	}
	J.scanned = 1;
	J.gen = 1;

	struct wbuf recs;
	wbuf_init(&recs);
	for (int pass = 0; pass < 3; pass++) {
		if (pass == 2) {
			if (!(flags & 4))
				break;
			/* The program unregisters everything. */
			struct gdb_jit_descriptor d;
			if (remote_read(&d, desc, sizeof(d)))
				break;
			d.first_entry = 0;
			d.relevant_entry ^= 1;
			memcpy(mem + (desc - BASE), &d, sizeof(d));
		}
		wbuf_reset(&recs);
		jit_poll(&recs);
		check_records(&recs);
		uint32_t live = 0;
		for (struct jimg *g = J.imgs; g; g = g->next)
			live++;
		FUZZ_CHECK(listened == live);
		FUZZ_CHECK(unwind_images == (fake_agent.cfg.native ? live : 0));
		if (pass == 2 && J.ndesc == 1)
			FUZZ_CHECK(J.imgs == NULL && listened == 0 && unwind_images == 0);
	}
	wbuf_free(&recs);
	reset();
	free(mem);
	return 0;
}
